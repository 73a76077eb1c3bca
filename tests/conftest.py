"""Shared fixtures: small named instance files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from whale_opt.io import read_instance
from whale_opt.problem_data import Instance

# The suite draws the same examples every run, so main stays green on what it
# passed; `make fuzz` draws fresh ones (HYPOTHESIS_PROFILE=explore) to hunt.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def small() -> Instance:
    """The two-rack mixed example of FORMAT.md, extended."""
    return read_instance(INSTANCES / "small" / "two-racks-mixed.json")
