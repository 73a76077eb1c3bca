"""A replay with shares of one GPU and CPU-only jobs: every round checked."""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim import SimConfig, simulate
from whale_opt.sim.trace import TraceJob


def _trace() -> list[TraceJob]:
    jobs = []
    for k in range(40):
        kind = k % 4
        jobs.append(
            TraceJob(
                id=f"j{k}",
                submit_s=60 * k,
                gpus=(1, 1, 0, 2)[kind],
                gpu_milli=(300, 1000, 1000, 1000)[kind],
                actual_duration_s=600 + 37 * k,
                cpu=(2.0, 4.0, 8.0, 8.0)[kind],
                topology="node",
            )
        )
    return jobs


@pytest.mark.parametrize("policy", ["wspt", "best-fit", "cpsat"])
def test_replay_with_shares_and_cpu_only_jobs_is_valid_every_round(policy: str) -> None:
    cluster = Instance(
        "share",
        {"A100": GpuType("A100", 80)},
        (
            Node("n0", "A100", 2, "nvswitch", cpu=32, memory_gb=128),
            Node("n1", "A100", 2, "pcie", cpu=32, memory_gb=128),
        ),
        (),
        (),
    )
    config = SimConfig(policy=policy, time_limit_s=0.3, check_decisions=True, seed=1)
    result = simulate(_trace(), cluster, config)
    assert len(result.jobs) == 40
    assert (result.jobs["status"] == "completed").all()
    segments = result.segments
    shares = segments[(segments["gpu_amount"] > 0) & (segments["gpu_amount"] < 1)]
    assert len(shares) == 10 and (shares["gpu_amount"] == 0.3).all()
    # Some GPU held two shares at once: sharing happened, not one share per GPU.
    overlapping = any(
        a.end_s > b.start_s and b.end_s > a.start_s
        for gpu, group in shares.groupby(shares["gpus"].map(lambda g: g[0]))
        for a, b in zip(group.itertuples(), group.iloc[1:].itertuples(), strict=False)
    )
    assert overlapping
    cpu_only = segments[segments["gpus"].map(len) == 0]
    assert len(cpu_only) == 10 and (cpu_only["gpu_amount"] == 0).all()
