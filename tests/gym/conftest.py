"""Environments on small runs, and a seeded random agent that takes only legal actions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from whale_opt.gym import GpuClusterEnv, GymConfig
from whale_opt.io import read_instance
from whale_opt.sim import SimConfig, tenant_trace

SMALL = Path(__file__).resolve().parents[2] / "instances" / "small" / "two-racks-mixed.json"


def small_config(**changes: object) -> GymConfig:
    """The FORMAT.md cluster (two nodes of two types, a failed GPU, tenant quotas), 16
    multi-tenant jobs of three classes, two placement preferences, decisions checked."""
    cluster = read_instance(SMALL).replace(running=(), queue=())
    trace = tenant_trace(16, cluster, load=1.5, seed=3, median_duration_s=1800)
    config = GymConfig(
        cluster=cluster,
        trace=trace,
        queue_slots=4,
        preferences=("end", "frag-aware"),
        sim=SimConfig(check_decisions=True),
    )
    return replace(config, **changes)


def synthetic_config(**changes: object) -> GymConfig:
    """The 32-GPU synthetic hetero cluster, 12 synthetic jobs an episode, decisions checked."""
    config = GymConfig(n_jobs=12, queue_slots=4, sim=SimConfig(check_decisions=True))
    return replace(config, **changes)


def random_legal(env: GpuClusterEnv, seed: int) -> Iterator[int]:
    """Actions drawn uniformly among the legal ones, from a seeded generator."""
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.choice(np.flatnonzero(env.action_masks())))


@pytest.fixture(params=["small", "synthetic", "synthetic-auto-advance", "synthetic-training"])
def config(request: pytest.FixtureRequest) -> GymConfig:
    """Each small setup; the auto-advance ones advance by themselves when that is all the
    agent could do; the last is how ``whale-opt train`` sets it up (the wspt order in the
    slots, work-conserving rounds)."""
    if request.param == "small":
        return small_config(auto_advance=True)
    if request.param == "synthetic-training":
        return synthetic_config(auto_advance=True, queue_order="smith", work_conserving=True)
    return synthetic_config(auto_advance=request.param == "synthetic-auto-advance")
