"""Where a job goes: the placement search over a cluster state.

A :class:`PlacementSearch` finds the best placement of one queued job on a
cluster state (:class:`~whale_opt.placement.state.ClusterState`), reading it
only through the methods of :class:`~whale_opt.placement.occupancy.Occupancy`.
Placement rules (what fits where) live here and in
:mod:`whale_opt.placement.fitting` once, so every policy that list-schedules
obeys the same ones as the checker: starting now needs exact free GPUs
(NVLink-connected when asked), later starts need free GPU counts. The search
scans the job's eligible nodes group by group (one GPU type, one node size
for an NVLink job), fastest type first.

Soft preferences are priced, not required (:mod:`whale_opt.placement.pricing`):
only jobs that have one pay for the extra searches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from whale_opt.placement import fitting, sharing
from whale_opt.placement.occupancy import NodeGroup, Occupancy
from whale_opt.placement.pricing import penalty_s, priced_preferences, tries, usage_s
from whale_opt.placement.records import Placement
from whale_opt.problem_data import QueuedJob
from whale_opt.topology import popcount, single_node

__all__ = ["PREFERENCES", "Occupancy", "PlacementSearch"]


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
        shaped = None if job is instance.queue[position] else job
        groups = state.node_groups(position, shaped, gpu_type, within)
        # Fastest types first, so their ends prune the search on slower ones.
        priced = self.priced and not by_start and instance.policy.priced
        for group in sorted(groups, key=lambda g: instance.durations[position][g.gpu_type]):
            duration = instance.durations[position][group.gpu_type]
            usage = usage_s(instance, position, group.gpu_type) if priced else 0.0
            latest = horizon
            if best is not None:
                # Nothing starting later than this can beat the best key found.
                ahead = usage + (0 if by_start or self.prefer != "end" else duration)
                latest = min(horizon, math.floor(best[0] - ahead))
            if latest < 0:
                continue
            for placement in self._type_placements(state, job, duration, group, latest):
                key = self._key(state, placement, by_start)
                if usage:
                    key = (key[0] + usage, *key[1:])
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
        self, state: Occupancy, job: QueuedJob, duration: int, group: NodeGroup, horizon: int
    ) -> list[Placement]:
        if job.cpu_only:
            return sharing.cpu_only(state, job, duration, group, horizon)
        if job.shares:
            return sharing.shared_gpu(state, job, duration, group, horizon)
        if single_node(job, state.topology(group.nodes[0])):
            return fitting.single_node(
                state,
                job,
                duration,
                group,
                horizon,
                every_start_now=self.prefer == "frag-aware",
                wait_for_release=self.wait_for_release,
            )
        if job.topology == "nvlink":
            return fitting.whole_nodes(state, job, duration, group, horizon)
        return fitting.spread(state, job, duration, group, horizon)


def _both(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    """Nodes both restrictions allow (None: no restriction)."""
    if a is None:
        return b
    return a if b is None else a & b
