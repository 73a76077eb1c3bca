"""The replay's floor (whale_opt.sim.floor): below every schedule, and it sees contention."""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim import SimConfig, simulate
from whale_opt.sim.floor import over_floor, replay_floor
from whale_opt.sim.trace import TraceJob


def one_gpu_cluster(speed: float = 1.0) -> Instance:
    return Instance("one", {"g": GpuType("g", 80, speed=speed)}, (Node("n0", "g", 1),))


def test_one_job_alone_is_floored_at_its_own_run_time() -> None:
    trace = (TraceJob("a", 5_000, 1, actual_duration_s=3_600, duration_s=3_600),)
    floor = replay_floor(trace, one_gpu_cluster(speed=2.0))
    # 1,800 s on a GPU of speed 2; a unit is charged at its bucket's start (300 s).
    assert 1_800 - 300 <= floor <= 1_800


def test_two_jobs_on_one_gpu_cannot_both_run_at_once() -> None:
    trace = tuple(TraceJob(name, 0, 1, actual_duration_s=1_000) for name in "ab")
    floor = replay_floor(trace, one_gpu_cluster())
    # Any schedule ends them at 1,000 and 2,000 s: 1,500 s; each alone: 1,000 s.
    assert 1_500 - 300 <= floor <= 1_500
    fifo = simulate(trace, one_gpu_cluster(), SimConfig(policy="fifo", check_decisions=True))
    assert fifo.summary["weighted_jct_s"] == pytest.approx(1_500)


def test_the_trace_weights_price_the_floor_not_the_policys_aging() -> None:
    cluster = one_gpu_cluster()
    cluster = cluster.replace(policy=cluster.policy.__class__(aging_per_hour=5.0))
    trace = (
        TraceJob("heavy", 0, 1, actual_duration_s=1_000, weight=9.0),
        TraceJob("light", 0, 1, actual_duration_s=1_000, weight=1.0),
    )
    # Best: heavy first, (9 * 1,000 + 1 * 2,000) / 10 = 1,100 s.
    assert 1_100 - 300 <= replay_floor(trace, cluster) <= 1_100


def test_a_job_no_gpu_type_can_hold_is_refused() -> None:
    trace = (TraceJob("big", 0, 1, actual_duration_s=10, min_gpu_memory_gb=200.0),)
    with pytest.raises(ValueError, match="'big' fits no GPU type"):
        replay_floor(trace, one_gpu_cluster())


def test_a_replay_that_left_jobs_unfinished_is_not_set_against_the_floor() -> None:
    done = {"jobs": 3, "completed": 3, "weighted_jct_s": 3_000.0}
    assert over_floor(done, 1_500.0) == 2.0
    assert over_floor({**done, "completed": 2}, 1_500.0) is None
