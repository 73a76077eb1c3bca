"""Recorded ``squeue --json`` / ``sinfo --json`` documents of a real Slurm 22.05.

Recorded by ``python -m tests.slurm.record_fixtures`` (see that module for
the cluster state each file holds); ``manifest.json`` has the time of each
read, which the tests use as ``now``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Recorded:
    """One recorded read of a cluster: both documents and the time of the read."""

    squeue: dict[str, Any]
    sinfo: dict[str, Any]
    now: int


def recorded(layout: str) -> Recorded:
    """The recording of the ``plain`` or ``indexed`` cluster."""
    manifest = json.loads((DATA / "manifest.json").read_text())
    return Recorded(
        json.loads((DATA / f"{layout}.squeue.json").read_text()),
        json.loads((DATA / f"{layout}.sinfo.json").read_text()),
        manifest[layout]["now"],
    )


@pytest.fixture
def indexed() -> Recorded:
    """4 nodes, gpu:g0:1..g7:1 each: running, in-flight, requeued, held and
    skipped jobs; n2 drained (tests/slurm/record_fixtures.py, indexed_state)."""
    return recorded("indexed")


@pytest.fixture
def plain() -> Recorded:
    """4 nodes, gpu:a100:8 each: n1 shared by two jobs and one in flight, a
    job across n2+n3, held jobs; n4 down (record_fixtures.py, plain_state)."""
    return recorded("plain")
