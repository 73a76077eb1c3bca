"""Local search over list-scheduling orders, in a time budget.

A decision is fully determined by the order in which the serial schedule
generator places jobs, so the search moves one job at a time to another
place in the order and keeps the move when the decision@1 objective does not
get worse. Moves favour jobs whose weighted delay is large, moved earlier.
Schedules are re-generated only from the first changed position: timeline
snapshots are kept every few positions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from whale_opt.decision import Action, JobDecision, objective
from whale_opt.patience import Patience
from whale_opt.placement.serial import complete, place_in_order
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance

SNAPSHOT_EVERY = 16
Snapshots = dict[int, tuple[ClusterState, dict[int, JobDecision]]]


@dataclass(frozen=True)
class TypedOrder:
    """A list-scheduling order whose jobs are held to GPU types (queue position ->
    type; :func:`whale_opt.placement.serial.place_in_order`): a relaxation's
    choice of type as well as of order. The search's moves keep the types."""

    order: Sequence[int]
    types: Mapping[int, str] = field(default_factory=dict)


class OrderSearch:
    """Serial schedules of an instance, re-generated from the first changed position."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.base = ClusterState(instance)
        self.evaluations = 0

    def run(
        self,
        order: Sequence[int],
        changed_from: int = 0,
        snapshots: Snapshots | None = None,
        types: Mapping[int, str] | None = None,
    ) -> tuple[list[JobDecision], Snapshots]:
        """Decisions for ``order``, its jobs held to ``types`` (:class:`TypedOrder`),
        reusing ``snapshots`` taken before ``changed_from`` (with the same types)."""
        self.evaluations += 1
        snapshots = snapshots or {}
        resume = max((k for k in snapshots if k <= changed_from), default=0)
        if resume in snapshots:
            timeline, decided = snapshots[resume][0].copy(), dict(snapshots[resume][1])
        else:
            resume, timeline, decided = 0, self.base.copy(), {}
        kept = {k: v for k, v in snapshots.items() if k <= resume}

        def snapshot(k: int) -> None:
            index = resume + k
            if index % SNAPSHOT_EVERY == 0:
                kept[index] = (timeline.copy(), dict(decided))

        place_in_order(self.instance, order[resume:], timeline, decided, snapshot, types)
        return complete(self.instance, decided), kept


def improve(
    instance: Instance,
    orders: Sequence[Sequence[int] | TypedOrder],
    deadline: float,
    seed: int = 0,
    moves: int | None = None,
    patience: Patience | None = None,
) -> tuple[list[JobDecision], float]:
    """The best schedule found from ``orders`` by local search until ``deadline``,
    or until ``patience`` runs out (each better schedule restarts its clock).

    ``moves`` caps the number of tried moves (for reproducible runs).
    """
    patience = Patience() if patience is None else patience
    search = OrderSearch(instance)
    rng = random.Random(seed)
    best_jobs: list[JobDecision] = []
    best_value = float("inf")
    best_order: list[int] = []
    best_snaps: Snapshots = {}
    types: Mapping[int, str] | None = None  # the best order's
    for given in orders:
        typed = given if isinstance(given, TypedOrder) else TypedOrder(given)
        jobs, snaps = search.run(typed.order, types=typed.types)
        value = objective(instance, jobs)
        if value < best_value:
            best_jobs, best_value, best_snaps = jobs, value, snaps
            best_order, types = list(typed.order), typed.types
    n = len(best_order)
    tried = 0
    while n > 1 and not patience.over(deadline) and (moves is None or tried < moves):
        tried += 1
        i = _pick(instance, best_jobs, best_order, rng)
        j = max(0, i - 1 - int(rng.expovariate(1 / max(1.0, n / 8))))
        if rng.random() < 0.25:
            j = rng.randrange(n)
        if i == j:
            continue
        order = list(best_order)
        order.insert(j, order.pop(i))
        jobs, snaps = search.run(order, min(i, j), best_snaps, types)
        value = objective(instance, jobs)
        if value < best_value:
            patience.progress(value)
        if value <= best_value:
            best_jobs, best_value, best_order, best_snaps = jobs, value, order, snaps
    return best_jobs, best_value


def order_by_starts(
    instance: Instance,
    starts: Mapping[int, float],
    jobs: Sequence[JobDecision],
    order: Sequence[int],
) -> list[int]:
    """The queue positions of ``order`` by the start ``starts`` gives them (queue
    position -> seconds from now), the others by their start in ``jobs`` (a
    deferred job last), equal starts in ``order``'s order: a list schedule's order
    from start times estimated elsewhere (a relaxation's, for one)."""
    index = instance.queue_index
    at = {index[item.id]: item.start_s for item in jobs if item.id in index}
    rank = {k: r for r, k in enumerate(order)}

    def key(k: int) -> tuple[float, int]:
        start = starts.get(k, at.get(k))
        return (math.inf if start is None else start), rank[k]

    return sorted(order, key=key)


def blend_orders(first: Sequence[int], second: Sequence[int], share: float) -> list[int]:
    """The positions of ``first`` by their rank in it and in ``second`` mixed,
    ``share`` of the way to ``second``'s (0: ``first``; 1: ``second``), ties in
    ``first``'s order."""
    rank = {k: r for r, k in enumerate(second)}
    mixed = {k: (1 - share) * r + share * rank[k] for r, k in enumerate(first)}
    return sorted(first, key=lambda k: mixed[k])


def _pick(
    instance: Instance, jobs: Sequence[JobDecision], order: Sequence[int], rng: random.Random
) -> int:
    """An order index to move: often a job with a large weighted end, else any."""
    if rng.random() < 0.5:
        return rng.randrange(len(order))
    by_id = {item.id: item for item in jobs}
    sample = rng.sample(range(len(order)), min(8, len(order)))

    def delay(index: int) -> float:
        position = order[index]
        item = by_id[instance.queue[position].id]
        weight = instance.weights[position]
        return weight * (item.start_s or 0) if item.action is Action.PLANNED else 0.0

    return max(sample, key=delay)
