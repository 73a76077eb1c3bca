"""A round's starts judged as a replay lives them: the rest re-planned by the greedy.

A round's decision is two things: what starts now (and what is preempted for
it), which the cluster carries out, and a plan for the jobs that wait, which
the next round makes again from scratch. The round's objective prices both,
so a search can win a round by a plan for the waiting jobs that no later
round keeps: it starts a small job now on GPUs a wide job was planned on,
and plans the wide job later; the next round, with new arrivals, does it
again (bench/VERSUS_WSPT.md, the dgx1 replays).

:func:`rolled_out` keeps a decision's starts and preemptions and plans every
other queued job with the base policy (the WSPT list schedule, as the
greedy plans them). Its objective prices the starts by what the greedy would
make of the rest: the one-step lookahead of rollout algorithms, whose
decision is no worse than the base policy's over a horizon when each round
takes the rolled-out value's best. :class:`whale_opt.cpsat.model.CpSatPolicy`
uses it, when its preset's ``rollout`` is on, to keep the round's search
result only when its starts, so continued, cost no more than the greedy's.
"""

from __future__ import annotations

from collections.abc import Sequence

from whale_opt.decision import Action, JobDecision
from whale_opt.placement.records import to_placement
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.serial import complete, place_in_order
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance


def rolled_out(
    instance: Instance, jobs: Sequence[JobDecision], order: Sequence[int], prefer: str
) -> list[JobDecision]:
    """``jobs``' starts now and preemptions, and every other queued job list-scheduled
    after them in ``order`` with placement preference ``prefer``."""
    index = instance.queue_index
    gone = frozenset(item.id for item in jobs if item.action is Action.PREEMPT)
    timeline = ClusterState(instance, preempted=gone, search=PlacementSearch(prefer))
    decided: dict[int, JobDecision] = {}
    for item in jobs:
        k = index.get(item.id)
        if k is None or item.action is not Action.START:
            continue
        placement = to_placement(instance, k, item)
        assert placement is not None  # a start names its GPUs
        timeline.commit(k, placement)
        decided[k] = item
    place_in_order(instance, [k for k in order if k not in decided], timeline, decided)
    running = instance.running_index
    return complete(instance, decided, frozenset(running[i] for i in gone))
