"""Where a share of one GPU, or a CPU-only job, fits on a group of alike nodes.

The placement search (:mod:`whale_opt.placement.search`) asks these for a job
with ``gpu_milli`` below 1000 (:func:`shared_gpu`) or with no GPU
(:func:`cpu_only`) instead of :mod:`whale_opt.placement.fitting`.

A share starting now goes on one exact GPU: first a GPU other shares are on
and still have room beside (the fullest such GPU: packing shares keeps whole
GPUs free for whole-GPU jobs), else a free GPU of the node with the fewest
free GPUs left. Such a GPU counts as one whole GPU of its node until its last
share ends. A later start is planned by count, as every later start is: the
share counts as its fraction of a GPU on the node (no GPU is reserved by id).
"""

from __future__ import annotations

from whale_opt.placement.fitting import earliest_later_few
from whale_opt.placement.occupancy import NodeGroup, Occupancy
from whale_opt.placement.profile import EPS
from whale_opt.placement.records import Placement
from whale_opt.problem_data import MILLI, QueuedJob


def shared_gpu(
    state: Occupancy, job: QueuedJob, duration: int, group: NodeGroup, horizon: int
) -> list[Placement]:
    """A share of one GPU of ``group``: now on the best GPU, else its earliest later start."""
    if state.quota_fit(job, 0, duration, 0) == 0:
        best: tuple[int, int, int, int] | None = None  # (-milli in use, free GPUs, node, index)
        for node in group.nodes:
            found = share_now(state, node, job, duration)
            if found is None:
                continue
            index, used = found
            key = (-used, state.free_count(node), node, index)
            if best is None or key < best:
                best = key
        if best is not None:
            node, index = best[2], best[3]
            return [Placement(0, duration, group.gpu_type, (node,), (1,), (1 << index,))]
    return _later(state, job, duration, group, horizon)


def share_now(state: Occupancy, node: int, job: QueuedJob, duration: int) -> tuple[int, int] | None:
    """(GPU index, milli already on it) where a share of ``job`` could start now on
    ``node`` for ``duration``: the fullest shared GPU with room, else the lowest
    free GPU (0 milli); None when none, or the node's CPU or memory, cannot."""
    if state.part_fit(node, 0, duration, 0, job, 0) != 0:
        return None  # CPU or host memory
    limit = state.healthy_count(node)
    best: tuple[int, int] | None = None
    for index, (used, last) in state.shares_now(node).items():
        if used + job.gpu_milli > MILLI:
            continue
        # The GPU counts whole a while longer if this share outlives the others.
        if duration > last and state.gpu_peak(node, last, duration) + 1 > limit + EPS:
            continue
        if best is None or (-used, index) < (-best[1], best[0]):
            best = (index, used)
    if best is not None:
        return best
    free = state.free_mask(node)
    if free and state.gpu_peak(node, 0, duration) + 1 <= limit + EPS:
        return (free & -free).bit_length() - 1, 0
    return None


def cpu_only(
    state: Occupancy, job: QueuedJob, duration: int, group: NodeGroup, horizon: int
) -> list[Placement]:
    """A CPU-only job on one node of ``group``: now on the node with the fewest free
    GPUs (its CPU is least likely to be wanted by GPU work), else its earliest later start."""
    if state.quota_fit(job, 0, duration, 0) == 0:
        now = [n for n in group.nodes if state.part_fit(n, 0, duration, 0, job, 0) == 0]
        if now:
            node = min(now, key=lambda n: (state.free_count(n), n))
            return [Placement(0, duration, group.gpu_type, (node,), (0,), (0,))]
    return _later(state, job, duration, group, horizon)


def _later(
    state: Occupancy, job: QueuedJob, duration: int, group: NodeGroup, horizon: int
) -> list[Placement]:
    """The earliest start after now on one node of ``group``, by count
    (:func:`whale_opt.placement.fitting.earliest_later_few`: nodes scanned in
    order of when they first have the job's GPU amount unused)."""
    found = earliest_later_few(state, job, duration, group, horizon, release_rule=False)
    if found is None:
        return []
    start, node = found
    return [Placement(start, start + duration, group.gpu_type, (node,), (job.gpu_count,))]
