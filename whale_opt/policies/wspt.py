"""The greedy: Smith's rule order, each job at its earliest-ending, tightest place.

Overdue jobs (past their wait ceiling) go first, in the order they passed
it; the others by priority class rank (higher first), then in order of
effective weight / (GPUs x shortest duration), highest first (ties: earlier
submission, then id); see :func:`whale_opt.policies.ordered.ranked`. Each
takes the placement that ends earliest (a faster GPU type later can beat a
slower one now; soft preferences priced in); among equal ends, the
tightest fit, and inside a node the GPUs that leave the largest NVLink
block free. Jobs that cannot start now reserve GPU counts where they are
planned, so lower-ranked jobs backfill only around them. The same list
schedule is the CP-SAT model's hint and its fallback; the policy then
preempts where that pays (:mod:`whale_opt.placement.preempt`).
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


def smith_ratio(instance: Instance, position: int) -> float:
    """Effective weight / (GPUs x shortest duration) of job ``position`` (0: unservable;
    see :meth:`~whale_opt.problem_data.Instance.gpu_area`)."""
    area = instance.gpu_area(position)
    return 0.0 if area is None else instance.weights[position] / area


def wspt_order(instance: Instance) -> list[int]:
    """Queue positions: overdue jobs first (as :func:`ranked`), then by class rank,
    then Smith's ratio, highest first; unservable jobs last within their class.

    CP-SAT's hint and the head cut of an overloaded round follow this order.
    """
    return ranked(instance, lambda k, job: -smith_ratio(instance, k))


class WsptPolicy(OrderedPolicy):
    """Greedy WSPT list scheduling with best-fit, fragmentation-aware placement."""

    name = "wspt"
    prefer = "end"

    def order(self, instance: Instance) -> list[int]:
        """Smith's-rule order."""
        return wspt_order(instance)
