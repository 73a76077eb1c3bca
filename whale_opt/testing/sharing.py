"""Strategies for GPU sharing: queued jobs that ask a share of one GPU or no GPU,
and running jobs that share GPUs (their shares adding up to at most one GPU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import strategies as st

from whale_opt.problem_data import MILLI, Node, QueuedJob, RunningJob
from whale_opt.testing.cluster import _rarely

SHARES = (100, 250, 300, 470, 500, 700, 900)


@st.composite
def shared_queue(
    draw: st.DrawFn, queue: Sequence[QueuedJob], force: bool = False
) -> tuple[QueuedJob, ...]:
    """``queue`` with some one-GPU jobs asking a share of their GPU
    (``gpu_milli`` < 1000) and some jobs turned CPU-only (``gpus`` 0); with
    ``force``, the first job always asks a share of one GPU."""
    out = []
    for k, job in enumerate(queue):
        if force and k == 0:
            job = replace(job, gpu_count=1, gpu_milli=draw(st.sampled_from(SHARES)))
        elif job.gpu_count == 1 and draw(st.booleans()):
            job = replace(job, gpu_milli=draw(st.sampled_from(SHARES)))
        elif _rarely(draw, 5):
            job = replace(job, gpu_count=0, cpu=float(draw(st.sampled_from([1, 4, 16]))))
        out.append(job)
    return tuple(out)


@st.composite
def shared_running(
    draw: st.DrawFn, cluster: Sequence[Node], running: Sequence[RunningJob], tenants: Sequence[str]
) -> tuple[RunningJob, ...]:
    """``running`` plus jobs sharing free healthy GPUs (shares of a GPU add up to
    at most 1000) and now and then a CPU-only job on a node that is up."""
    held = {gpu for job in running for gpu in job.gpu_ids}
    free = [
        node.gpu_id(i)
        for node in cluster
        for i in node.healthy_indices
        if node.gpu_id(i) not in held
    ]
    jobs = list(running)
    shared = draw(st.lists(st.sampled_from(free), unique=True, max_size=3)) if free else []
    for g, gpu in enumerate(shared):
        left = MILLI
        for s in range(draw(st.integers(1, 3))):
            milli = draw(st.sampled_from([m for m in SHARES if m <= left] or [left]))
            if milli > left or left <= 0:
                break
            left -= milli
            jobs.append(
                RunningJob(
                    id=f"s{g}_{s}",
                    gpu_ids=(gpu,),
                    remaining_s=draw(st.integers(1, 20_000)),
                    tenant=draw(st.sampled_from(tenants)),
                    started_at=draw(st.integers(-100_000, 0)),
                    gpu_milli=milli,
                )
            )
    up = [node.id for node in cluster if not node.down]
    if up and _rarely(draw, 3):
        jobs.append(
            RunningJob(
                id="c0",
                gpu_ids=(),
                node=draw(st.sampled_from(up)),
                remaining_s=draw(st.integers(1, 20_000)),
                tenant=draw(st.sampled_from(tenants)),
            )
        )
    return tuple(jobs)
