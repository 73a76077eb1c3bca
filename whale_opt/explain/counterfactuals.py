"""What is the smallest change that would start a job, verified by re-solving?

Counterfactuals are edits from a fixed list (:mod:`whale_opt.explain.whatif`),
each checked by solving the edited instance again: ``verified`` only if the
job then starts now. :func:`explain` puts a job's reasons
(:mod:`whale_opt.explain.reasons`) and its counterfactuals together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whale_opt.decision import Action, Decision
from whale_opt.explain.blockers import _without_quota
from whale_opt.explain.reasons import (
    Reason,
    after_preemptions,
    decided_timeline,
    preference_reason,
    quota_reason,
    reasons,
    running_holders,
)
from whale_opt.explain.whatif import Change, apply_change, interrupted
from whale_opt.options import SolveOptions
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import TOPOLOGIES, Instance, QueuedJob, RunningJob, tenant_quota
from whale_opt.solve import solve


@dataclass(frozen=True)
class Counterfactual:
    """A change tried to start the job now, and what re-solving said.

    ``verified`` (and ``start_now``) only when the re-solved decision starts
    the job now; ``decision_action`` is the job's action after the change.
    """

    change: str
    instance_change: Change
    verified: bool
    start_now: bool
    decision_action: str


@dataclass(frozen=True)
class Explanation:
    """Why ``job_id`` has ``action``, most decisive reason first, and what would help."""

    job_id: str
    action: Action
    start_s: int | None
    reasons: tuple[Reason, ...]
    counterfactuals: tuple[Counterfactual, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "id": self.job_id,
            "action": self.action.value,
            "start_s": self.start_s,
            "reasons": [
                {"kind": r.kind, "message": r.message, "facts": r.facts} for r in self.reasons
            ],
            "counterfactuals": [
                {
                    "change": c.change,
                    "instance_change": c.instance_change.to_dict(),
                    "verified": c.verified,
                    "start_now": c.start_now,
                    "decision_action": c.decision_action,
                }
                for c in self.counterfactuals
            ],
        }

    def render(self) -> str:
        """A readable report."""
        when = "" if self.start_s is None else f" at {self.start_s} s"
        lines = [f"{self.job_id}: {self.action.value}{when}"]
        for k, reason in enumerate(self.reasons, start=1):
            lines.append(f"  {k}. [{reason.kind}] {reason.message}")
        for cf in self.counterfactuals:
            mark = "starts now (verified)" if cf.verified else f"{cf.decision_action}, not started"
            lines.append(f"  what if: {cf.change} -> {mark}")
        return "\n".join(lines)


def _as_running(instance: Instance, decision: Decision, skip: str) -> tuple[RunningJob, ...]:
    queued = {job.id: job for job in instance.queue}
    return tuple(
        RunningJob(
            item.id,
            item.gpu_ids,
            item.end_s or 1,
            tenant=queued[item.id].tenant,
            cpu=queued[item.id].cpu,
            memory_gb=queued[item.id].memory_gb,
            weight=queued[item.id].weight,
            preemptible=queued[item.id].preemptible,
            priority_class=queued[item.id].priority_class,
            gpu_milli=queued[item.id].gpu_milli,
            node=item.cpu_only_node,
        )
        for item in decision.by_action(Action.START)
        if item.id != skip and item.id in queued
    )


def _requeued(instance: Instance, decision: Decision) -> tuple[QueuedJob, ...]:
    """The running jobs ``decision`` preempts, back in the queue: their remaining work,
    the work since their last checkpoint and their restore time."""
    out = []
    for item in decision.by_action(Action.PREEMPT):
        job = instance.running[instance.running_index[item.id]]
        out.append(interrupted(instance, job))
    return tuple(out)


def _candidates(instance: Instance, decision: Decision, position: int) -> list[list[Change]]:
    """Groups of changes to try, each group smallest first (stop at the first that works)."""
    job = instance.queue[position]
    groups: list[list[Change]] = []
    every = tuple(instance.gpu_types)
    if job.gpu_types and set(job.gpu_types) != set(every):
        groups.append([Change("gpu-types", job.id, every)])
    if job.gpu_count > 1 and instance.eligible_types[position]:
        order = TOPOLOGIES  # nvlink -> node -> rack -> any
        looser = order[order.index(job.topology) + 1 :]
        groups.append([Change("topology", job.id, t) for t in looser])
    quota = tenant_quota(instance, job.tenant)
    kept = after_preemptions(instance, decision)  # what runs on: the preempted leave
    if quota is not None:
        # Where it would go without the quota, after the round's other placements:
        # a quota that binds only later (a planned job of the tenant) needs the
        # quota of that moment (``needed_quota_then``).
        free_q = _without_quota(kept, job.tenant)
        could = decided_timeline(free_q, decision, position).best_placement(position, by_start=True)
        facts = quota_reason(kept, position, decision, could).facts
        needs = {facts["needed_quota"], facts["needed_quota_with_started"]}
        needs.add(facts.get("needed_quota_then", quota))
        groups.append([Change("quota", job.tenant, n) for n in sorted(needs) if n > quota])
    eligible = ClusterState(instance).eligible(position)
    holders = [h["job"] for h in running_holders(kept, eligible)]
    preemptible = {
        r.id
        for r in instance.running
        if r.preemptible and instance.priority_classes[r.priority_class].preemptible
    }
    holders = [h for h in holders if h in preemptible]
    tries = [Change("preempt", value=(h,)) for h in holders]
    if len(holders) > 1:
        tries.append(Change("preempt", value=tuple(holders)))
    groups.append(tries)
    item = decision.job(job.id)
    if item.action is Action.PLANNED and item.start_s:
        carried = _as_running(instance, decision, job.id) + _requeued(instance, decision)
        groups.append([Change("wait", job.id, item.start_s, jobs=carried)])
    return groups


def counterfactuals(
    instance: Instance,
    decision: Decision,
    position: int,
    solver: str = "wspt",
    options: SolveOptions | None = None,
) -> list[Counterfactual]:
    """Changes from the fixed list, each re-solved; those that start the job now first."""
    job_id = instance.queue[position].id
    out = []
    for group in _candidates(instance, decision, position):
        for change in group:
            changed = apply_change(instance, change)
            action = solve(changed, solver, options).job(job_id).action
            works = action is Action.START
            out.append(Counterfactual(change.describe(), change, works, works, action.value))
            if works:
                break
    return [cf for cf in out if cf.verified] + [cf for cf in out if not cf.verified]


def explain(
    instance: Instance,
    job_ids: Sequence[str] | None = None,
    solver: str = "wspt",
    *,
    with_counterfactuals: bool = True,
    options: SolveOptions | None = None,
) -> list[Explanation]:
    """Explain every job not started (or ``job_ids``) under ``solver``'s decision
    (solved with ``options``, default ``SolveOptions()``).

    Raises KeyError for a job id that is not queued.
    """
    decision = solve(instance, solver, options)
    if job_ids is None:
        job_ids = [
            item.id for item in decision.jobs if item.action in (Action.PLANNED, Action.DEFERRED)
        ]
    out = []
    for job_id in job_ids:
        position = instance.queue_position(job_id)
        item = decision.job(job_id)
        if item.action is Action.START:  # only what its preferences cost it
            decided = decided_timeline(instance, decision, position)
            paid = preference_reason(instance, position, item, decided)
            found = [] if paid is None else [paid]
        else:
            found = reasons(instance, decision, position)
        tried = (
            counterfactuals(instance, decision, position, solver, options)
            if with_counterfactuals and item.action is not Action.START
            else []
        )
        out.append(Explanation(job_id, item.action, item.start_s, tuple(found), tuple(tried)))
    return out
