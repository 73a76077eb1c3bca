"""Shared fixtures: small named instance files."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.io import read_instance
from whale_opt.problem_data import Instance

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def small() -> Instance:
    """The two-rack mixed example of FORMAT.md, extended."""
    return read_instance(INSTANCES / "small" / "two-racks-mixed.json")
