"""Coverage: every job of the instance once in a decision, with an action that
fits what the job is.

A queued job is ``start``, ``planned`` or ``deferred``; a running job is
``keep`` or ``preempt``; a lost job (:attr:`Instance.lost`: running when its
hardware failed) is ``lost``, with a reason, and nothing else: it cannot be
kept (its GPUs are gone) nor preempted (nothing of it runs). ``lost`` is for
lost jobs only: a job on healthy hardware is never lost.
"""

from __future__ import annotations

from collections.abc import Iterable

from whale_opt.decision import Action, JobDecision
from whale_opt.problem_data import Instance

QUEUED_ACTIONS = (Action.START, Action.PLANNED, Action.DEFERRED)
RUNNING_ACTIONS = (Action.KEEP, Action.PREEMPT)

Problem = tuple[str | None, str, str]
"""A broken rule: (job id, kind, message), as :class:`whale_opt.check.Violation` holds it."""


def coverage(
    instance: Instance, jobs: Iterable[JobDecision]
) -> tuple[dict[str, JobDecision], list[Problem]]:
    """Each job's item (the first, when one appears twice) and what breaks coverage."""
    queued = {job.id for job in instance.queue}
    running = {job.id for job in instance.running}
    lost = {job.id: job for job in instance.lost}
    items: dict[str, JobDecision] = {}
    problems: list[Problem] = []
    for item in jobs:
        if item.id in items:
            problems.append((item.id, "duplicate", "appears more than once in the decision"))
            continue
        items[item.id] = item
        if item.id in queued:
            if item.action not in QUEUED_ACTIONS:
                problems.append((item.id, "action", f"queued job cannot be '{item.action}'"))
        elif item.id in running:
            if item.action not in RUNNING_ACTIONS:
                why = " (its hardware is healthy)" if item.action is Action.LOST else ""
                problems.append((item.id, "action", f"running job cannot be '{item.action}'{why}"))
        elif item.id in lost:
            if item.action is not Action.LOST:
                failure = instance.lost_reason(lost[item.id])
                problems.append(
                    (
                        item.id,
                        "lost",
                        f"is on failed hardware ({failure}): must be 'lost', not '{item.action}'",
                    )
                )
            elif not item.reason:
                problems.append((item.id, "lost", "is 'lost' without a reason"))
        else:
            problems.append((item.id, "unknown-job", "is neither queued, running nor lost"))
    for job_id in sorted((queued | running | set(lost)) - set(items)):
        problems.append((job_id, "missing", "has no decision"))
    return items, problems
