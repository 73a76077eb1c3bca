"""The greedy: Smith's rule order, each job at its earliest-ending, tightest place.

Jobs go in order of weight / (GPUs x shortest duration), highest first
(ties: earlier submission, then id). Each takes the placement that ends
earliest (a faster GPU type later can beat a slower one now); among equal
ends, the tightest fit, and inside a node the GPUs that leave the largest
NVLink block free. Jobs that cannot start now reserve GPU counts where they
are planned, so lower-ranked jobs backfill only around them. The same
schedule is the CP-SAT model's hint and its fallback.
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy
from whale_opt.problem_data import Instance


def wspt_order(instance: Instance) -> list[int]:
    """Queue positions by Smith's ratio, highest first; unservable jobs last."""

    def key(position: int) -> tuple[float, int, str]:
        job = instance.queue[position]
        shortest = instance.min_duration(position)
        ratio = 0.0 if shortest is None else job.weight / (job.gpus * shortest)
        return (-ratio, job.submitted_at, job.id)

    return sorted(range(len(instance.queue)), key=key)


class WsptPolicy(OrderedPolicy):
    """Greedy WSPT list scheduling with best-fit, fragmentation-aware placement."""

    name = "wspt"
    prefer = "end"

    def order(self, instance: Instance) -> list[int]:
        """Smith's-rule order."""
        return wspt_order(instance)
