"""A lower bound on the weighted JCT of any schedule of a trace: the replay's floor.

Every policy of a replay, and any other, even one that knew every arrival in
advance and could preempt for free, completes the trace's jobs at a weighted
JCT no lower than this. It is the time-indexed transportation bound of a
round (:func:`whale_opt.bounds.flow_bound`, mean busy time) over the whole
trace at once: each job released at its arrival, with the actual durations
the simulator runs (:mod:`whale_opt.sim.jobs`, rounded down), on the
cluster's free capacity per GPU type. Gangs, placement, CPU, memory and
quotas are relaxed and work is divisible, so the bound is valid for every
schedule; node failures, restarts and checkpoints only add work, so it
stays valid with them.

Against it, a policy's weighted JCT says how much any scheduler could still
gain on that replay: a target "x% below the best heuristic" is out of reach
when the heuristic is within x% of the floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from whale_opt.bounds import flow_bound
from whale_opt.problem_data import Instance
from whale_opt.sim.config import SimConfig
from whale_opt.sim.jobs import eligible_types, full_run_s, job_runs
from whale_opt.sim.trace import TraceJob

BUCKETS = 2000  # time buckets over the horizon (a unit is charged at its bucket's start)
MAX_ARCS = 4_000_000  # fewer buckets past this many (job, type, bucket) arcs


def replay_floor(
    trace: tuple[TraceJob, ...],
    cluster: Instance,
    config: SimConfig | None = None,
    buckets: int = BUCKETS,
) -> float:
    """A lower bound, in seconds, on ``sum w_j (C_j - submit_j) / sum w_j`` over
    ``trace`` replayed on ``cluster`` with ``config``'s seed and noise (see the
    module docstring). Every job must fit some GPU type of the cluster."""
    if not trace:
        return math.nan
    config = config or SimConfig()
    runs = job_runs(trace, cluster, config)
    t0 = min(job.submit_s for job in trace)
    queue = []
    for job in trace:
        run = runs[job.id]
        types = sorted(eligible_types(run, cluster))
        if not types:
            raise ValueError(f"job {job.id!r} fits no GPU type of the cluster")
        by_type = tuple((t, max(1, math.floor(full_run_s(run, cluster, t)))) for t in types)
        request = replace(job, duration_s=None, duration_by_type_s=by_type, gpu_types=())
        queue.append(request.queued(None))
    # Aging, ceilings and class factors shape a policy, not the replay's metric: the
    # trace's own weights. The bound is valid for any horizon (deferral is priced
    # at the horizon, never above what running later would cost); it is tight when
    # the horizon lies past the fluid schedule's end: the last arrival, then the
    # whole work at the cluster's full speed, twice over, and the longest job.
    speeds = {name: gpu_type.speed for name, gpu_type in cluster.gpu_types.items()}
    area = sum(min(q.gpu_amount * d * speeds[t] for t, d in q.duration_by_type_s) for q in queue)
    capacity = sum(len(node.healthy_indices) * speeds[node.gpu_type] for node in cluster.nodes)
    longest = max(d for q in queue for _, d in q.duration_by_type_s)
    span = max(job.submit_s for job in trace) - t0
    horizon = math.ceil(span + 2 * area / capacity + 2 * longest)
    policy = replace(cluster.policy, aging_per_hour=0.0, max_wait_s=None, horizon_s=horizon)
    instance = cluster.replace(
        queue=tuple(queue), running=(), now=max(job.submit_s for job in trace), policy=policy
    )
    starts = [float(job.submit_s - t0) for job in trace]
    ends = [s + min(instance.durations[k].values()) for k, s in enumerate(starts)]
    weights = tuple(job.weight for job in trace)
    pairs = sum(len(d) for d in instance.durations)
    step = max(300.0, horizon / max(100, min(buckets, MAX_ARCS // max(pairs, 1))))
    total = flow_bound(instance, starts, ends, weights=weights, step=step)
    released = sum(w * s for w, s in zip(weights, starts, strict=True))
    return (total - released) / sum(weights)


def over_floor(summary: Mapping[str, Any], floor: float) -> float | None:
    """A replay's weighted JCT (its :attr:`SimResult.summary`) over the floor; None
    when it left jobs unfinished: its figure then covers the finished ones only,
    which the floor does not bound."""
    if summary["completed"] != summary["jobs"]:
        return None
    return float(summary["weighted_jct_s"]) / floor
