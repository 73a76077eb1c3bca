"""Best-fit packing: the largest gangs first, each on the tightest node.

The difference to FIFO is the order: FIFO places jobs as they arrived,
best-fit places the backlog largest GPU count first (ties by submit time,
then id), as best-fit-decreasing bin packing does, so large gangs claim
whole nodes before small jobs scatter over them and the small ones fill
the gaps left. Both place each job at its earliest start on the node it
leaves the fewest GPUs free on.

As in every baseline, a higher priority class rank goes first; this order
applies within a rank (:mod:`whale_opt.policies.ordered`).
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class BestFitPolicy(OrderedPolicy):
    """Best-fit decreasing: largest GPU count first, tightest placement."""

    name = "best-fit"
    prefer = "best-fit"

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by GPU count (largest first), then submit time, then id."""
        return ranked(instance, lambda k, job: -job.gpu_count)
