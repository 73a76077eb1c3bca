"""The progress callback the CLI's bar listens to reports every completion."""

from __future__ import annotations

from whale_opt.sim import simulate, synthetic_cluster, synthetic_trace


def test_progress_counts_up_to_every_completed_job() -> None:
    cluster = synthetic_cluster(64, seed=2)
    trace = synthetic_trace(60, cluster, load=0.9, seed=2)
    seen: list[int] = []
    result = simulate(trace, cluster, progress=seen.append)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert seen[-1] == len(result.jobs) == 60
