"""Serial schedule generation (list scheduling) and decision assembly.

The one engine every solver shares: the heuristics are an order plus
:func:`list_schedule`; CP-SAT's hint, decoder and fallback go through
:func:`place_in_order`; every decision is built by :func:`assemble`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from whale_opt.decision import (
    Action,
    Decision,
    JobDecision,
    Status,
    lost_decisions,
    objective,
    with_dropped,
)
from whale_opt.placement.reasons import deferral_reason
from whale_opt.placement.records import to_job_decision
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance


def place_in_order(
    instance: Instance,
    order: Sequence[int],
    timeline: ClusterState,
    decided: dict[int, JobDecision],
    after_each: Callable[[int], None] | None = None,
    types: Mapping[int, str] | None = None,
) -> None:
    """Serial schedule generation: each job of ``order`` at its earliest-ending place.

    Updates ``timeline`` and ``decided`` (queue position -> decision) in
    place; ``after_each(k)`` runs after the k-th job (1-based) is placed. A job
    ``types`` gives a GPU type (queue position -> type) is placed on that type,
    wherever it ends there, when it fits there at all.
    """
    for k, position in enumerate(order, start=1):
        held = types.get(position) if types else None
        placement = None if held is None else timeline.best_placement(position, gpu_type=held)
        if placement is None:
            placement = timeline.best_placement(position)
        if placement is None:
            decided[position] = JobDecision(
                instance.queue[position].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, position, timeline),
            )
        else:
            timeline.commit(position, placement)
            decided[position] = to_job_decision(instance, position, placement)
        if after_each is not None:
            after_each(k)


def complete(
    instance: Instance,
    decided: dict[int, JobDecision],
    preempted: frozenset[int] = frozenset(),
) -> list[JobDecision]:
    """Every job's decision: queued ones from ``decided`` (else deferred), running
    ones preempted when their position is in ``preempted``, else kept."""
    jobs = [
        decided.get(k) or JobDecision(job.id, Action.DEFERRED, reason="not considered")
        for k, job in enumerate(instance.queue)
    ]
    jobs += [
        JobDecision(job.id, Action.PREEMPT if r in preempted else Action.KEEP)
        for r, job in enumerate(instance.running)
    ]
    return jobs


def list_schedule(
    instance: Instance,
    order: Sequence[int],
    timeline: ClusterState | None = None,
    *,
    prefer: str = "end",
    types: Mapping[int, str] | None = None,
) -> list[JobDecision]:
    """Serial schedule generation over ``order``; jobs not in it are deferred.

    ``prefer`` is the placement preference (see :data:`whale_opt.placement.search.PREFERENCES`);
    ``types`` holds jobs to GPU types (:func:`place_in_order`).
    """
    if timeline is None:
        timeline = ClusterState(instance, search=PlacementSearch(prefer))
    decided: dict[int, JobDecision] = {}
    place_in_order(instance, order, timeline, decided, types=types)
    return complete(instance, decided)


def assemble(
    instance: Instance,
    solver: str,
    jobs: Sequence[JobDecision],
    status: Status,
    bound: float,
    started: float,
) -> Decision:
    """A :class:`Decision` with its objective recomputed, dropped preferences
    named with their reasons, one ``lost`` item per lost job, and the wall
    time since ``started``.

    Every solver and policy ends here, so this is the one place lost jobs
    (:attr:`Instance.lost`: running when their hardware failed) enter a
    decision: ``lost``, with what failed as the reason. Items ``jobs``
    already has for them are replaced, so a decision assembled again from
    another's jobs (a queue's head, a split round) reports each once. A lost
    job costs nothing in this round's objective: its loss happened before the
    round, and no decision can change it.
    """
    lost = {job.id for job in instance.lost}
    kept = tuple(item for item in jobs if item.id not in lost)
    final = with_dropped(instance, kept + lost_decisions(instance))
    return Decision(
        instance=instance.name,
        solver=solver,
        status=status,
        objective=objective(instance, final),
        bound=bound,
        horizon_s=instance.policy.horizon_s,
        jobs=final,
        wall_s=time.perf_counter() - started,
    )
