"""A small cluster (the FORMAT.md example, emptied) and seeded traces for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.io import read_instance
from whale_opt.problem_data import Instance

SMALL = Path(__file__).resolve().parents[2] / "instances" / "small" / "two-racks-mixed.json"


@pytest.fixture(scope="session")
def cluster() -> Instance:
    """5 nodes, 40 GPUs, three GPU types, one failed GPU, two tenant quotas."""
    return read_instance(SMALL).replace(name="small-cluster", running=(), queue=())
