"""Wait-ceiling reasons: a job past its ceiling (overdue), told when it starts,
and a job that overdue jobs went ahead of, told which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whale_opt.decision import Action, Decision, job_nodes
from whale_opt.explain.record import Reason
from whale_opt.problem_data import Instance, tenant_quota, waited_s


def _hours(seconds: float) -> str:
    """``93600`` -> ``"26 h"``, ``5400`` -> ``"1.5 h"``, ``1000`` -> ``"17 min"``."""
    if abs(seconds) < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f}".rstrip("0").rstrip(".") + " h"


def _overdue_order(instance: Instance) -> list[int]:
    """Overdue queue positions in the order they go: first past its ceiling first."""
    overdue = [k for k, late in enumerate(instance.overdue) if late]
    return sorted(
        overdue,
        key=lambda k: (
            instance.ceiling_at(k),
            instance.queue[k].submitted_at,
            instance.queue[k].id,
        ),
    )


def _past_ceiling(instance: Instance, decision: Decision, position: int, ceiling: int) -> Reason:
    """The job is past ``ceiling``: it goes ahead of every job that is not; when it starts."""
    job = instance.queue[position]
    waited = waited_s(job)
    order = _overdue_order(instance)
    ahead = [
        instance.queue[k].id
        for k in order[: order.index(position)]
        if decision.job(instance.queue[k].id).action is not Action.START
    ]
    item = decision.job(job.id)
    turn = (
        "runs next"
        if not ahead
        else f"runs after {len(ahead)} job(s) past their ceilings before it ({', '.join(ahead)})"
    )
    if item.start_s is not None:
        when = f"expected start {item.start_s} s (in {_hours(item.start_s)})"
    else:
        when = "no start planned within the horizon"
    return Reason(
        "ceiling",
        f"waited {_hours(waited)} > max_wait_s {_hours(ceiling)} (class {job.priority_class}):"
        f" overdue, it goes ahead of every job that is not and {turn}; {when}",
        {
            "waited_s": waited,
            "max_wait_s": ceiling,
            "overdue": True,
            "overdue_by_s": waited - ceiling,
            "ahead": ahead,
            "expected_start_s": item.start_s,
        },
    )


def _overdue_rivals(
    instance: Instance, position: int, decision: Decision, before: float, eligible: Sequence[int]
) -> Reason | None:
    """Overdue jobs placed on the job's eligible nodes to start by ``before`` (its own
    start; one starting with it went first too, taking room it would need): they go first."""
    ids = {instance.nodes[k].id for k in eligible}
    job = instance.queue[position]
    rivals: list[dict[str, Any]] = []
    for k in _overdue_order(instance):
        other = instance.queue[k]
        item = decision.job(other.id)
        if k == position or item.start_s is None or item.start_s > before:
            continue
        if set(job_nodes(item)) & ids or (
            other.tenant == job.tenant and tenant_quota(instance, job.tenant)
        ):
            rivals.append(
                {
                    "job": other.id,
                    "priority_class": other.priority_class,
                    "waited_s": waited_s(other),
                    "max_wait_s": instance.max_wait(other),
                    "start_s": item.start_s,
                    "nodes": list(job_nodes(item)),
                }
            )
    if not rivals:
        return None
    named = ", ".join(
        f"{r['job']} (waited {_hours(r['waited_s'])} > {_hours(r['max_wait_s'])})" for r in rivals
    )
    ceiling = instance.max_wait(job)
    if ceiling is None:
        own = f"its class {job.priority_class} has no ceiling"
    else:
        left = ceiling - waited_s(job)
        own = f"its own ceiling, {_hours(ceiling)}, is {_hours(left)} away"
    return Reason(
        "ceiling",
        f"jobs past their wait ceiling go first, across classes: {named}; {own}",
        {"overdue": False, "waited_s": waited_s(job), "max_wait_s": ceiling, "by": rivals},
    )
