"""A rule-based mix: priority classes, weight, aging, best-fit placement.

Jobs go by priority class rank first (as every baseline, see
:mod:`whale_opt.policies.ordered`), then by effective priority: the job's
effective weight (its weight x its class's factor, aged by
``policy.aging_per_hour`` when the instance sets a rate) plus, when the
instance sets no aging of its own, the policy's linear aging of
``aging_per_hour`` weight units for every hour waited (waiting time is
``-submitted_at``: submit times are seconds relative to the round's now).
A job is aged once, by the instance's rate when it has one. With the
default rate of 1 weight unit per hour, a weight-1 job that has waited more
than 3 hours goes before a fresh weight-4 job of its class, so no job
starves behind a stream of heavier work. Ties by submit time, then id. Each
job takes its earliest start on the node it leaves the fewest GPUs free on.
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class HybridPolicy(OrderedPolicy):
    """Priority classes, weight with linear aging, best-fit placement.

    Parameters
    ----------
    aging_per_hour
        Weight units a job's effective priority gains per hour of waiting,
        used when the instance's ``policy.aging_per_hour`` is 0.
    """

    name = "hybrid"
    prefer = "best-fit"
    AGING_PER_HOUR = 1.0

    def __init__(self, aging_per_hour: float = AGING_PER_HOUR) -> None:
        if aging_per_hour < 0:
            raise ValueError(f"aging_per_hour must be >= 0 (got {aging_per_hour!r})")
        self.aging_per_hour = aging_per_hour

    def priority(self, instance: Instance, position: int) -> float:
        """Effective priority of queued job ``position``: effective weight, plus
        linear aging when the instance does not age weights itself."""
        weight = instance.weights[position]
        if instance.policy.aging_per_hour > 0:
            return weight  # already aged by the instance's rate
        waited_h = max(0, -instance.queue[position].submitted_at) / 3600
        return weight + self.aging_per_hour * waited_h

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by class rank, then effective priority, highest first."""
        return ranked(instance, lambda k, job: -self.priority(instance, k))
