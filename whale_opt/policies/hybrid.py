"""A rule-based mix: priority classes from weight, aging, best-fit placement.

A job's effective priority is its weight (its priority class: higher goes
first) plus ``aging_per_hour`` for every hour it has waited (waiting time is
``-submitted_at``: submit times are seconds relative to the round's now).
With the default rate of 1 weight unit per hour, a weight-1 job that has
waited more than 3 hours goes before a fresh weight-4 job, so no job
starves behind a stream of high-priority work. Ties by submit time, then
id. Each job takes its earliest start on the node it leaves the fewest GPUs
free on.
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class HybridPolicy(OrderedPolicy):
    """Weight classes with linear aging, best-fit placement.

    Parameters
    ----------
    aging_per_hour
        Weight units a job's effective priority gains per hour of waiting.
    """

    name = "hybrid"
    prefer = "best-fit"
    AGING_PER_HOUR = 1.0

    def __init__(self, aging_per_hour: float = AGING_PER_HOUR) -> None:
        if aging_per_hour < 0:
            raise ValueError(f"aging_per_hour must be >= 0 (got {aging_per_hour!r})")
        self.aging_per_hour = aging_per_hour

    def priority(self, instance: Instance, position: int) -> float:
        """Effective priority of queued job ``position``: weight plus aging."""
        job = instance.queue[position]
        waited_h = max(0, -job.submitted_at) / 3600
        return job.weight + self.aging_per_hour * waited_h

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by effective priority, highest first."""
        return ranked(instance, lambda k, job: -self.priority(instance, k))
