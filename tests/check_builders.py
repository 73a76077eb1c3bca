"""Decision builders shared by the checker tests (test_check*.py)."""

from __future__ import annotations

from collections.abc import Sequence

from whale_opt.check import Violation
from whale_opt.decision import Action, Decision, JobDecision, Status, objective, with_dropped
from whale_opt.problem_data import Instance


def start(job_id: str, ids: Sequence[str], end: int = 100) -> JobDecision:
    return JobDecision(job_id, Action.START, gpu_ids=tuple(ids), start_s=0, end_s=end)


def planned(
    job_id: str, begin: int, end: int, nodes: Sequence[str], counts: Sequence[int] = ()
) -> JobDecision:
    return JobDecision(
        job_id,
        Action.PLANNED,
        start_s=begin,
        end_s=end,
        nodes=tuple(nodes),
        node_gpus=tuple(counts),
    )


def deferred(job_id: str) -> JobDecision:
    return JobDecision(job_id, Action.DEFERRED, reason="test")


def preempt(job_id: str = "r1") -> JobDecision:
    return JobDecision(job_id, Action.PREEMPT)


def decide(
    instance: Instance,
    *items: JobDecision,
    bound: float = 0.0,
    value: float | None = None,
    keep_running: bool = True,
    report: bool = True,
) -> Decision:
    """A decision of ``items``: running jobs not listed kept (unless ``keep_running``
    is off), dropped preferences reported as every solver reports them (unless
    ``report`` is off), objective recomputed unless ``value`` is given."""
    jobs = list(with_dropped(instance, items) if report else items)
    listed = {item.id for item in jobs}
    if keep_running:
        jobs += [JobDecision(r.id, Action.KEEP) for r in instance.running if r.id not in listed]
    return Decision(
        instance=instance.name,
        solver="test",
        status=Status.FEASIBLE,
        objective=objective(instance, jobs) if value is None else value,
        bound=bound,
        horizon_s=instance.policy.horizon_s,
        jobs=tuple(jobs),
    )


def found(violations: list[Violation]) -> set[tuple[str, str | None]]:
    """The (kind, job) pairs of ``violations``."""
    return {(v.kind, v.job) for v in violations}
