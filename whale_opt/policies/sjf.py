"""SJF (shortest job first): jobs by estimated duration, earliest-end placement.

A job's estimated duration is its shortest over the GPU types it may use
(jobs no type can serve go last); ties by submit time, then id. Weights
and GPU counts play no part (that is WSPT).

As in every baseline, a higher priority class rank goes first; this order
applies within a rank (:mod:`whale_opt.policies.ordered`).
"""

from __future__ import annotations

import math

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class SjfPolicy(OrderedPolicy):
    """Shortest estimated duration first, each job where it ends earliest."""

    name = "sjf"
    prefer = "end"

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by shortest duration over eligible types."""

        def shortest(position: int) -> float:
            value = instance.min_duration(position)
            return math.inf if value is None else value

        return ranked(instance, lambda k, job: shortest(k))
