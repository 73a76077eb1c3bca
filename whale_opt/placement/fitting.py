"""Where one job fits on a group of alike nodes, by the job's topology.

The placement search (:mod:`whale_opt.placement.search`) asks, per group of
eligible nodes of one GPU type (:class:`~whale_opt.placement.occupancy.NodeGroup`):

- :func:`single_node`: a job on one node: now on exact free GPUs
  (NVLink-connected when asked), else at the earliest later start;
- :func:`whole_nodes`: a multi-node NVLink gang: whole nodes of one rack
  with one shared start;
- :func:`spread`: a ``rack`` or ``any`` job: GPUs from several nodes.

Each scans only the nodes that can matter. The free-interval index
(:class:`~whale_opt.placement.index.FreeIndex`) gives, for every node of the
group at once, a lower bound on its earliest fit (GPU counts alone, and the
tenant's quota); exact fits (CPU, memory, quota) are then computed in order
of that bound, until no node left can beat the best one found. The answers
are those of a scan of every node in node order: the same placement, ties
broken the same way.
"""

from __future__ import annotations

import bisect

import numpy as np

from whale_opt.placement.index import FreeIndex
from whale_opt.placement.occupancy import NodeGroup, Occupancy
from whale_opt.placement.profile import INF
from whale_opt.placement.records import Placement
from whale_opt.problem_data import QueuedJob
from whale_opt.topology import choose_gpus, needs_nvlink

_NOW = np.zeros(1, dtype=np.int64)  # the moment 0, as a candidate start

FEW = 12  # nodes in a group up to which a single-node search loops over them instead
SHORT = 32  # queued jobs in a round up to which it loops too (arrays would not pay back)


def single_node(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    group: NodeGroup,
    horizon: int,
    *,
    every_start_now: bool,
    wait_for_release: bool,
) -> list[Placement]:
    """The job on one node of ``group``: its starts now (all of them with
    ``every_start_now``, else the tightest: fewest free GPUs left, then the
    lowest node), else its earliest later start by ``horizon``."""
    nvlink = needs_nvlink(job)
    gpus = job.gpu_count
    counts = state.free_counts()[group.array]
    room_now = counts >= gpus
    if room_now.any() and state.quota_fit(job, 0, duration, 0) == 0:
        nodes = group.array[room_now]
        order = range(len(nodes)) if every_start_now else np.lexsort((nodes, counts[room_now]))
        out: list[Placement] = []
        for j in order:
            node = int(nodes[j])
            if state.node_fit(node, 0, duration, job, 0) != 0:
                continue
            mask = choose_gpus(state.topology(node), state.free_mask(node), gpus, nvlink)
            if mask is not None:
                out.append(Placement(0, duration, group.gpu_type, (node,), (gpus,), (mask,)))
                if not every_start_now:
                    break
        if out:
            return out  # a start now ends no later than any later start on this type
    few = len(group.nodes) <= FEW or len(state.instance.queue) <= SHORT
    later = earliest_later_few if few else _earliest_later
    found = later(state, job, duration, group, horizon, nvlink and wait_for_release)
    if found is None:
        return []
    start, node = found
    return [Placement(start, start + duration, group.gpu_type, (node,), (gpus,))]


def earliest_later_few(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    group: NodeGroup,
    horizon: int,
    release_rule: bool,
) -> tuple[int, int] | None:
    """:func:`_earliest_later` node by node, for a group of :data:`FEW` nodes or
    fewer, or a round of :data:`SHORT` queued jobs or fewer (where building and
    reading the arrays costs more than it saves), and for a share of a GPU or a
    CPU-only job (whose GPU amount the arrays' whole-GPU bounds do not cover):
    nodes by when the job's GPU amount is first unused, until none can beat the
    best start found."""
    best: tuple[int, int] | None = None  # (start, node)
    for free_at, node in sorted((state.free_from(n, job.gpu_amount), n) for n in group.nodes):
        if free_at > horizon or (best is not None and free_at >= best[0]):
            break
        first = 1
        if release_rule and not state.topology(node).clique:
            release = state.first_end_at(node)
            if release == INF:
                continue
            first = max(1, int(release))
        give_up = horizon if best is None else best[0] - 1
        t = state.node_fit(node, first, duration, job, give_up)
        if t <= horizon and (best is None or t < best[0]):
            best = (int(t), node)
    return best


def _earliest_later(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    group: NodeGroup,
    horizon: int,
    release_rule: bool,
) -> tuple[int, int] | None:
    """(start, node) of the job's earliest start after now on one node of ``group``.

    Among nodes with the same earliest start, the one whose GPUs are first
    unused (then the lowest node) wins. A node is fitted exactly (CPU,
    memory, quota) only while its lower bound (the GPU count over the
    window, the quota) can still beat the best start found.
    """
    nodes = group.array
    first: np.ndarray | int = 1
    if release_rule:
        # NVLink sets in the future are not tracked: on a node whose GPUs are not all
        # linked, wait until something there ends.
        ends = state.first_ends()[nodes]
        first = np.where(group.clique, 1.0, np.maximum(ends, 1.0))
        known = first < INF
        nodes, first = nodes[known], first[known]
    quota = state.quota_fit(job, 1, duration, horizon)
    if quota == INF or len(nodes) == 0:
        return None
    index = state.free_index()
    lows, unused = index.earliest_and_unused(nodes, job.gpu_count, duration, first)
    lows = np.maximum(lows, quota)
    hopeful = lows <= horizon
    nodes, lows, unused = nodes[hopeful], lows[hopeful], unused[hopeful]
    best: tuple[float, float, int] | None = None  # (start, first unused, node)
    for j in np.lexsort((nodes, unused, lows)):
        low, free_at, node = float(lows[j]), float(unused[j]), int(nodes[j])
        give_up: float = horizon
        if best is not None:
            # Nodes come by (lower bound, first unused, node): once that passes the
            # best (start, first unused, node) found, no node left can beat it.
            if (low, free_at, node) > best:
                break
            give_up = best[0] if (free_at, node) < best[1:] else best[0] - 1
        t = state.node_fit(node, int(low), duration, job, give_up)
        if t <= horizon and (best is None or (t, free_at, node) < best):
            best = (t, free_at, node)
    return None if best is None else (int(best[0]), best[2])


def whole_nodes(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    group: NodeGroup,
    horizon: int,
) -> list[Placement]:
    """Multi-node nvlink gang: whole nodes of one rack with one shared start.

    At most one placement per rack, and only those that start no later than
    the best rack before them (a later start is never the better placement).
    """
    out: list[Placement] = []
    size = group.size  # every node of an NVLink job's group has this size
    if job.gpu_count % size:
        return out
    # When whole nodes could hold it from t=1, for the group at once.
    lows = state.free_index().earliest(group.array, size, duration, 1)
    for nodes, places in zip(group.rack_arrays, group.rack_places, strict=True):
        if len(nodes) < job.gpu_count // size:
            continue
        placement = _gang(state, job, duration, group.gpu_type, nodes, size, horizon, lows[places])
        if placement is not None:
            out.append(placement)
            horizon = min(horizon, placement.start)
    return out


def _gang(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    gpu_type: str,
    nodes: np.ndarray,
    size: int,
    horizon: int,
    lows: np.ndarray,
) -> Placement | None:
    """The gang on ``k`` whole nodes of ``nodes`` (one rack): now on the first
    ``k`` fully free ones in node order, else at the earliest start when ``k``
    nodes fit, on those that fit first (then the lowest). ``lows``: per node,
    when its GPUs alone could take the job's share from t=1."""
    k = job.gpu_count // size
    free = state.free_counts()
    if state.quota_fit(job, 0, duration) == 0:
        chosen: list[int] = []
        for n in nodes[free[nodes] == size].tolist():
            if state.part_fit(n, 0, duration, size, job) == 0:
                chosen.append(n)
                if len(chosen) == k:
                    masks = tuple(state.free_mask(m) for m in chosen)
                    return Placement(0, duration, gpu_type, tuple(chosen), (size,) * k, masks)
    t = 1
    while t <= horizon:
        if t > 1:
            lows = state.free_index().earliest(nodes, size, duration, t)
        fits = _first_fits(state, job, duration, size, nodes, lows, k, t, horizon)
        if fits is None:
            return None
        t_k = fits[-1][0]
        t_q = state.quota_fit(job, t_k, duration)
        if t_q == t_k == t:
            chosen_later = tuple(sorted(n for _, n in fits))
            return Placement(t, t + duration, gpu_type, chosen_later, (size,) * k)
        if t_q == INF:
            return None
        t = int(t_q)
    return None


def _first_fits(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    size: int,
    nodes: np.ndarray,
    lows: np.ndarray,
    k: int,
    t: int,
    horizon: int,
) -> list[tuple[float, int]] | None:
    """The ``k`` least (earliest fit from ``t``, node) of ``nodes`` taking
    ``size`` GPUs each, None when fewer than ``k`` fit by ``horizon``; ``lows``
    bound the fits from below (the GPU count alone)."""
    found: list[tuple[float, int]] = []
    for j in np.lexsort((nodes, lows)):
        low, node = float(lows[j]), int(nodes[j])
        if low > horizon or (len(found) >= k and (low, node) > found[k - 1]):
            break
        fit = state.part_fit(node, int(low), duration, size, job, horizon)
        if fit < INF:
            bisect.insort(found, (fit, node))
    return found[:k] if len(found) >= k else None


def spread(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    group: NodeGroup,
    horizon: int,
) -> list[Placement]:
    """``rack`` or ``any`` job: GPUs from several nodes (of one rack for ``rack``),
    at the earliest moment a node's use or the tenant's drops (or now) when
    enough GPUs stay unused over the window; fewest nodes first.

    Room only grows where use drops, so those moments are the candidates, and
    the moments CPU or memory beside the GPUs frees up. Those last are looked
    up only once a moment with GPUs enough failed: before it, the GPUs a
    window keeps unused at any moment are at most those at the last GPU drop,
    which were too few (or the quota said no)."""
    racks = group.racks if job.topology == "rack" else (group.nodes,)
    releases = np.asarray(state.quota_releases(job), dtype=np.int64)
    index = state.free_index()
    out = []
    for members in racks:
        nodes = group.array if len(racks) == 1 else np.array(members, dtype=np.int64)
        enough = _roomy(index, nodes, job, duration, [index.drops(nodes), releases, _NOW], horizon)
        host_unread = True  # CPU or memory may free up later than GPUs
        j = 0
        while j < len(enough):
            t = int(enough[j])
            quota = state.quota_fit(job, t, duration)
            if quota != t:
                if quota == INF:
                    break
                j = int(np.searchsorted(enough, quota, side="left"))
                continue
            placement = _spread_at(state, job, duration, group.gpu_type, nodes, t)
            if placement is not None:
                out.append(placement)
                break
            if host_unread:
                host_unread = False
                released = state.host_releases(job, nodes)  # none: asks no CPU or memory
                if released:
                    # Only the new moments need the room check: the rest passed it.
                    extra = _roomy(index, nodes, job, duration, released, horizon, after=t)
                    enough = np.union1d(enough[j + 1 :], extra)
                    j = 0
                    continue
            j += 1
    return out


def _roomy(
    index: FreeIndex,
    nodes: np.ndarray,
    job: QueuedJob,
    duration: int,
    moments: list[np.ndarray],
    horizon: int,
    after: int = -1,
) -> np.ndarray:
    """The distinct ``moments`` in (``after``, ``horizon``] at which the job's GPUs stay
    unused over its window on ``nodes``, node by node (necessary for a placement)."""
    times = np.unique(np.concatenate(moments))
    times = times[(times > after) & (times <= horizon)]
    return times[index.window_room(nodes, job.gpu_count, duration, times) >= job.gpu_count]


def _spread_at(
    state: Occupancy, job: QueuedJob, duration: int, gpu_type: str, group: np.ndarray, t: int
) -> Placement | None:
    """Tightest single node that holds the job, else the largest pieces first."""
    # Room right at t bounds the room over the whole window from above.
    rooms = state.free_index().room_at(group, t, state.free_counts())
    some = rooms > 0
    nodes, rooms = group[some], rooms[some]
    need = job.gpu_count
    picks: list[tuple[int, int]] = []
    holds = rooms >= need
    for j in np.lexsort((nodes[holds], rooms[holds])):
        node = int(nodes[holds][j])
        if state.room(job, node, t, duration) >= need:
            picks = [(need, node)]
            break
    if not picks:
        for j in np.lexsort((nodes, -rooms)):
            node = int(nodes[j])
            take = min(state.room(job, node, t, duration), need)
            if take > 0:
                picks.append((take, node))
                need -= take
            if need == 0:
                break
        if need > 0:
            return None
    picks.sort(key=lambda p: p[1])
    chosen = tuple(n for _, n in picks)
    counts = tuple(c for c, _ in picks)
    masks: tuple[int, ...] = ()
    if t == 0:
        found = [choose_gpus(state.topology(n), state.free_mask(n), c, False) for c, n in picks]
        if any(m is None for m in found):
            return None
        masks = tuple(m for m in found if m is not None)
    return Placement(t, t + duration, gpu_type, chosen, counts, masks)
