"""Where a job goes: the placement search over a cluster state.

A :class:`PlacementSearch` finds the best placement of one queued job on a
cluster state (:class:`~whale_opt.placement.state.ClusterState`), reading it
only through the methods of :class:`Occupancy`. Placement rules (what fits
where) live here once, so every policy that list-schedules obeys the same
ones as the checker: starting now needs exact free GPUs (NVLink-connected
when asked), later starts need free GPU counts.

Soft preferences are priced, not required (:mod:`whale_opt.placement.pricing`):
only jobs that have one pay for the extra searches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from whale_opt.placement.pricing import penalty_s, priced_preferences, tries
from whale_opt.placement.profile import EPS, INF, Profile
from whale_opt.placement.records import Placement
from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.topology import NodeTopology, choose_gpus, needs_nvlink, popcount, single_node


class Occupancy(Protocol):
    """What the search reads of a cluster state (see
    :class:`~whale_opt.placement.state.ClusterState` for each method)."""

    @property
    def instance(self) -> Instance: ...

    def topology(self, node: int) -> NodeTopology: ...

    def healthy_count(self, node: int) -> int: ...

    def free_mask(self, node: int) -> int: ...

    def free_count(self, node: int) -> int: ...

    def first_end_at(self, node: int) -> float: ...

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]: ...

    def group_use(self, nodes: Iterable[int]) -> Profile: ...

    def part_fit(
        self, node: int, start: int, duration: int, gpus: int, job: QueuedJob, give_up: float = INF
    ) -> float: ...

    def quota_fit(
        self, job: QueuedJob, start: float, duration: int, give_up: float = INF
    ) -> float: ...

    def node_fit(
        self, node: int, start: int, duration: int, job: QueuedJob, give_up: float = INF
    ) -> float: ...

    def free_from(self, node: int, gpus: int) -> float: ...

    def quota_releases(self, job: QueuedJob) -> list[int]: ...

    def room(self, job: QueuedJob, node: int, t: int, duration: int) -> int: ...

    def room_at(self, node: int, t: int) -> int: ...


PREFERENCES = ("end", "best-fit", "frag-aware")


@dataclass(frozen=True)
class PlacementSearch:
    """How a placement is chosen: the preference, and two rules bounds relax.

    ``prefer``: one of :data:`PREFERENCES` (see :meth:`_key`).
    ``priced``: soft preferences are priced into placements (bounds want plain
    earliest ends: False). ``wait_for_release``: an NVLink job is planned on a
    partially linked node no earlier than the first end of a job there (the
    checker's rule; bounds relax it: False).
    """

    prefer: str = "end"
    priced: bool = True
    wait_for_release: bool = True

    def __post_init__(self) -> None:
        if self.prefer not in PREFERENCES:
            raise ValueError(f"unknown placement preference {self.prefer!r}; choose {PREFERENCES}")

    def best_placement(
        self,
        state: Occupancy,
        position: int,
        latest_start: int | None = None,
        *,
        by_start: bool = False,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> Placement | None:
        """The placement of job ``position`` that ends earliest (ties: tightest fit).

        Starting now needs exact free GPUs (NVLink-connected when asked);
        later starts need free GPU counts. None when nothing fits by
        ``latest_start`` (default: the horizon). ``by_start`` picks the
        earliest start instead of the earliest end; ``gpu_type`` allows only
        that type, ``within`` only those nodes.

        A job with priced soft preferences gets the placement whose first
        criterion plus the penalty (in seconds) of the preferences it drops
        is least, among the best placements that honour each combination of
        them (in its zone, on a preferred type, NVLink-shaped) and the best
        unrestricted one. ``by_start`` and an unpriced search ignore them.
        """
        instance = state.instance
        job = instance.queue[position]
        horizon = instance.policy.horizon_s if latest_start is None else latest_start
        wanted = () if by_start or not self.priced else priced_preferences(instance, position)
        if wanted:
            return self._cheapest(state, position, horizon, wanted, gpu_type, within)
        return self._best(state, position, job, horizon, by_start, gpu_type, within)

    def _cheapest(
        self,
        state: Occupancy,
        position: int,
        horizon: int,
        wanted: tuple[str, ...],
        gpu_type: str | None,
        within: frozenset[int] | None,
    ) -> Placement | None:
        """The least-cost placement over the searches that honour ``wanted``."""
        instance = state.instance
        shortest = 0 if self.prefer != "end" else instance.min_duration(position) or 0
        best: tuple[float, ...] | None = None
        chosen: Placement | None = None
        for shape, allowed in tries(instance, position, state.eligible(position), wanted):
            nodes = _both(allowed, within)
            if nodes is not None and not nodes:
                continue
            # Dropping preferences costs >= 0: nothing later than the best key wins.
            latest = horizon if best is None else min(horizon, int(best[0]) - shortest)
            if latest < 0:
                continue
            placement = self._best(state, position, shape, latest, False, gpu_type, nodes)
            if placement is None:
                continue
            plain = self._key(state, placement, False)
            key = (plain[0] + penalty_s(instance, position, placement), *plain[1:])
            if best is None or key < best:
                best, chosen = key, placement
        return chosen

    def _best(
        self,
        state: Occupancy,
        position: int,
        job: QueuedJob,
        horizon: int,
        by_start: bool,
        gpu_type: str | None,
        within: frozenset[int] | None,
    ) -> Placement | None:
        """:meth:`best_placement` without soft preferences, for ``job`` shaped as given."""
        instance = state.instance
        best: tuple[float, ...] | None = None
        chosen: Placement | None = None
        # Nodes by type, and for NVLink jobs by size too: whether a job fits one
        # node, or takes whole nodes, depends on the node's size.
        groups: dict[tuple[str, int], list[int]] = {}
        for node in state.eligible(position, None if job is instance.queue[position] else job):
            if within is not None and node not in within:
                continue
            node_type = instance.nodes[node].gpu_type
            size = state.topology(node).size if job.topology == "nvlink" else 0
            if gpu_type is None or node_type == gpu_type:
                groups.setdefault((node_type, size), []).append(node)
        # Fastest types first, so their ends prune the search on slower ones.
        for (name, _), nodes in sorted(
            groups.items(), key=lambda item: instance.durations[position][item[0][0]]
        ):
            duration = instance.durations[position][name]
            latest = horizon
            if best is not None:
                # Nothing starting later than this can beat the best key found.
                latest = min(
                    horizon, int(best[0]) - (0 if by_start or self.prefer != "end" else duration)
                )
            if latest < 0:
                continue
            for placement in self._type_placements(state, job, duration, name, nodes, latest):
                key = self._key(state, placement, by_start)
                if best is None or key < best:
                    best, chosen = key, placement
        return chosen

    def _key(self, state: Occupancy, placement: Placement, by_start: bool) -> tuple[float, ...]:
        """How good a placement is under the search's preference (lower is better).

        ``end``: earliest end, then tightest fit. ``best-fit``: earliest start,
        then the fewest GPUs left free on the chosen nodes. ``frag-aware``:
        earliest start, then the least shrinking of the chosen nodes' largest
        free NVLink blocks, then the tightest fit.
        """
        leftover = 0
        shrink = 0  # how much the placement shrinks its nodes' largest free NVLink blocks
        if placement.start == 0:
            for n, c, mask in zip(placement.nodes, placement.counts, placement.masks, strict=True):
                topo = state.topology(n)
                free = state.free_mask(n)
                leftover += popcount(free) - c
                shrink += topo.largest_block(free) - topo.largest_block(free & ~mask)
        tail = (len(placement.nodes), placement.nodes[0])
        if by_start:
            return (placement.start, leftover, placement.end, *tail)
        if self.prefer == "best-fit":
            return (placement.start, leftover, placement.end, *tail)
        if self.prefer == "frag-aware":
            return (placement.start, shrink, leftover, placement.end, *tail)
        return (placement.end, leftover, *tail)

    def _type_placements(
        self,
        state: Occupancy,
        job: QueuedJob,
        duration: int,
        gpu_type: str,
        nodes: list[int],
        horizon: int,
    ) -> list[Placement]:
        if single_node(job, state.topology(nodes[0])):
            return self._single_node(state, job, duration, gpu_type, nodes, horizon)
        if job.topology == "nvlink":
            return _whole_nodes(state, job, duration, gpu_type, nodes, horizon)
        return _spread(state, job, duration, gpu_type, nodes, horizon)

    def _single_node(
        self,
        state: Occupancy,
        job: QueuedJob,
        duration: int,
        gpu_type: str,
        nodes: list[int],
        horizon: int,
    ) -> list[Placement]:
        out: list[Placement] = []
        nvlink = needs_nvlink(job)
        for node in nodes:
            if (
                state.free_count(node) >= job.gpu_count
                and state.node_fit(node, 0, duration, job, 0) == 0
            ):
                mask = choose_gpus(
                    state.topology(node), state.free_mask(node), job.gpu_count, nvlink
                )
                if mask is not None:
                    out.append(Placement(0, duration, gpu_type, (node,), (job.gpu_count,), (mask,)))
        if out:
            return out  # a start now ends no later than any later start on this type
        best_later: tuple[float, int] | None = None
        # Nodes by a cheap lower bound on when the job could start there; stop
        # once no node can beat the best start found.
        for bound, node in sorted((state.free_from(n, job.gpu_count), n) for n in nodes):
            if bound > horizon or (best_later is not None and bound >= best_later[0]):
                break
            # Not now: from the next moment something frees on this node.
            first = 1
            if self.wait_for_release and nvlink and not state.topology(node).clique:
                # NVLink sets in the future are not tracked: wait until something here ends.
                release = state.first_end_at(node)
                if release == INF:
                    continue
                first = int(release)
            give_up = horizon if best_later is None else best_later[0] - 1
            t = state.node_fit(node, max(1, first), duration, job, give_up)
            if t <= horizon and (best_later is None or t < best_later[0]):
                best_later = (t, node)
        if best_later is not None:
            t, node = best_later
            start = int(t)
            out.append(Placement(start, start + duration, gpu_type, (node,), (job.gpu_count,)))
        return out


def _whole_nodes(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    gpu_type: str,
    nodes: list[int],
    horizon: int,
) -> list[Placement]:
    """Multi-node nvlink gang: whole nodes of one rack with one shared start."""
    by_rack: dict[str, list[int]] = {}
    for node in nodes:
        by_rack.setdefault(state.instance.nodes[node].rack, []).append(node)
    out = []
    for rack_nodes in by_rack.values():
        size = state.topology(rack_nodes[0]).size
        same = [n for n in rack_nodes if state.topology(n).size == size]
        if job.gpu_count % size or len(same) < job.gpu_count // size:
            continue
        placement = _gang(
            state, job, duration, gpu_type, same, job.gpu_count // size, size, horizon
        )
        if placement is not None:
            out.append(placement)
    return out


def _gang(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    gpu_type: str,
    nodes: list[int],
    k: int,
    size: int,
    horizon: int,
) -> Placement | None:
    now = [
        n
        for n in nodes
        if state.free_mask(n) == state.topology(n).whole
        and state.part_fit(n, 0, duration, size, job) == 0
    ]
    if len(now) >= k and state.quota_fit(job, 0, duration) == 0:
        chosen = tuple(now[:k])
        return Placement(
            0, duration, gpu_type, chosen, (size,) * k, tuple(state.free_mask(n) for n in chosen)
        )
    t = 1
    while t <= horizon:
        fits = sorted((state.part_fit(n, t, duration, size, job), n) for n in nodes)
        t_k = fits[k - 1][0]
        if t_k == INF:
            return None
        t_q = state.quota_fit(job, t_k, duration)
        if t_q == t_k == t:
            chosen = tuple(sorted(n for _, n in fits[:k]))
            return Placement(t, t + duration, gpu_type, chosen, (size,) * k)
        if t_q == INF:
            return None
        t = int(t_q)
    return None


def _spread(
    state: Occupancy,
    job: QueuedJob,
    duration: int,
    gpu_type: str,
    nodes: list[int],
    horizon: int,
) -> list[Placement]:
    """``rack`` or ``any`` job: GPUs from several nodes, fewest nodes first."""
    groups: list[list[int]]
    if job.topology == "rack":
        by_rack: dict[str, list[int]] = {}
        for node in nodes:
            by_rack.setdefault(state.instance.nodes[node].rack, []).append(node)
        groups = list(by_rack.values())
    else:
        groups = [nodes]
    out = []
    for group in groups:
        # The group's total use over time: a necessary test before the per-node one.
        total = state.group_use(group)
        capacity = sum(state.healthy_count(n) for n in group)
        # Room only grows where use drops: try now and those moments.
        times = {0, *state.quota_releases(job)}
        times.update(
            total.times[k]
            for k in range(1, len(total.times))
            if total.levels[k] < total.levels[k - 1]
        )
        for t in sorted(times):
            if t > horizon:
                break
            if capacity - total.peak(t, t + duration) < job.gpu_count - EPS:
                continue
            if state.quota_fit(job, t, duration) != t:
                continue
            placement = _spread_at(state, job, duration, gpu_type, group, t)
            if placement is not None:
                out.append(placement)
                break
    return out


def _spread_at(
    state: Occupancy, job: QueuedJob, duration: int, gpu_type: str, group: list[int], t: int
) -> Placement | None:
    """Tightest single node that holds the job, else the largest pieces first."""
    # Room right at t bounds the room over the whole window from above.
    at_t = []
    for node in group:
        room = state.room_at(node, t)
        if room > 0:
            at_t.append((room, node))
    picks: list[tuple[int, int]] = []
    for _, node in sorted(r for r in at_t if r[0] >= job.gpu_count):
        if state.room(job, node, t, duration) >= job.gpu_count:
            picks = [(job.gpu_count, node)]
            break
    if not picks:
        need = job.gpu_count
        for _, node in sorted(at_t, key=lambda r: (-r[0], r[1])):
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


def _both(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    """Nodes both restrictions allow (None: no restriction)."""
    if a is None:
        return b
    return a if b is None else a & b
