"""FIFO (first come, first served): jobs in submission order, best-fit placement.

Jobs are placed in order of ``submitted_at`` (earliest first; ties by id).
A job that cannot start now is planned (reserving GPU counts), and later
jobs backfill only around it. Each job takes the earliest start, then the
node it leaves the fewest GPUs free on.

As in every baseline, a higher priority class rank goes first; this order
applies within a rank (:mod:`whale_opt.policies.ordered`).
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class FifoPolicy(OrderedPolicy):
    """First come, first served with best-fit placement."""

    name = "fifo"
    prefer = "best-fit"

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by submit time, then id."""
        return ranked(instance, lambda k, job: 0)
