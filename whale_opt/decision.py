"""The outcome of a round: per-job actions, the objective, bound and status.

The objective lives here, in one place, so that every solver, policy and the
checker price a decision the same way (FORMAT.md, decision@1):

    objective = sum over queued jobs of weight x end
              + sum over jobs placed outside their preferred zone of
                weight x policy.zone_penalty_s
              + sum over preempted running jobs of
                weight x (checkpoint_s + remaining_s)

where a deferred job ends at ``horizon_s`` + its shortest duration. A
preempted job is priced as if its remaining work were pushed back by itself
plus the checkpoint/restore time: the cheapest it can ever cost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from whale_opt.problem_data import Instance


class Action(enum.StrEnum):
    """What happens to a job this round."""

    START = "start"
    PLANNED = "planned"
    DEFERRED = "deferred"
    KEEP = "keep"
    PREEMPT = "preempt"


class Status(enum.StrEnum):
    """How the round's solve ended."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    GREEDY_FALLBACK = "greedy-fallback"
    INFEASIBLE_INPUT = "infeasible-input"


@dataclass(frozen=True)
class JobDecision:
    """One job's action.

    ``gpus`` for ``start``; ``nodes`` and ``node_gpus`` (GPUs per node, same
    order) for ``planned``; ``reason`` for ``deferred``. Times are seconds
    from the instance's now.
    """

    id: str
    action: Action
    gpus: tuple[str, ...] = ()
    start_s: int | None = None
    end_s: int | None = None
    nodes: tuple[str, ...] = ()
    node_gpus: tuple[int, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class Decision:
    """A full round decision (decision@1)."""

    instance: str
    solver: str
    status: Status
    objective: float
    bound: float
    horizon_s: int
    jobs: tuple[JobDecision, ...]
    wall_s: float = 0.0

    @property
    def gap(self) -> float:
        """(objective - bound) / max(objective, 1), never below 0."""
        return max(0.0, (self.objective - self.bound) / max(self.objective, 1.0))

    def job(self, job_id: str) -> JobDecision:
        """The decision about ``job_id``."""
        for item in self.jobs:
            if item.id == job_id:
                return item
        raise KeyError(job_id)

    def by_action(self, action: Action) -> tuple[JobDecision, ...]:
        """All job decisions with ``action``."""
        return tuple(item for item in self.jobs if item.action is action)

    def with_changes(self, **changes: Any) -> Decision:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)


def job_nodes(item: JobDecision) -> tuple[str, ...]:
    """The node ids a started or planned job occupies, in first-use order."""
    if item.action is Action.START:
        seen: dict[str, None] = {}
        for gpu in item.gpus:
            seen.setdefault(gpu.rpartition("/")[0], None)
        return tuple(seen)
    return item.nodes


def placement_penalty(instance: Instance, position: int, nodes: tuple[str, ...]) -> float:
    """Soft-preference penalty of queued job ``position`` placed on ``nodes``."""
    job = instance.queue[position]
    if job.zone is None or not nodes:
        return 0.0
    index = instance.node_index
    # An unknown node counts as outside (the checker reports it separately).
    outside = any(n not in index or instance.nodes[index[n]].zone != job.zone for n in nodes)
    return job.weight * instance.policy.zone_penalty_s if outside else 0.0


def preemption_cost(instance: Instance, running_position: int) -> float:
    """The price of preempting running job ``running_position``."""
    job = instance.running[running_position]
    return job.weight * (job.checkpoint_s + job.remaining_s)


def objective(instance: Instance, jobs: tuple[JobDecision, ...] | list[JobDecision]) -> float:
    """The decision@1 objective of ``jobs`` on ``instance`` (see module docstring).

    Queued jobs missing from ``jobs`` are priced as deferred, so a partial
    decision is never cheaper than a complete one.
    """
    by_id = {item.id: item for item in jobs}
    total = 0.0
    for position, job in enumerate(instance.queue):
        item = by_id.get(job.id)
        if item is None or item.action is Action.DEFERRED or item.end_s is None:
            total += job.weight * instance.deferred_cost_end(position)
            continue
        total += job.weight * item.end_s
        total += placement_penalty(instance, position, job_nodes(item))
    for position, running in enumerate(instance.running):
        item = by_id.get(running.id)
        if item is not None and item.action is Action.PREEMPT:
            total += preemption_cost(instance, position)
    return total
