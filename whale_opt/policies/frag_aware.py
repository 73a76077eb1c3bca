"""Fragmentation-aware packing: keep large NVLink blocks free.

In the spirit of fragmentation-gradient-descent packing: among the places
where a job starts earliest, take the one that leaves the largest
NVLink-connected block of free GPUs on its node (so a 2-GPU job on an empty
DGX-1 goes inside one quad and leaves the other quad whole). The order is
the greedy's (Smith's rule, see :mod:`whale_opt.policies.wspt`), so a
comparison with ``wspt`` isolates the effect of the placement rule.

As in every baseline, a higher priority class rank goes first; this order
applies within a rank (:mod:`whale_opt.policies.ordered`).
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance


class FragAwarePolicy(OrderedPolicy):
    """WSPT order, placement that keeps the largest NVLink blocks free."""

    name = "frag-aware"
    prefer = "frag-aware"

    def order(self, instance: Instance) -> list[int]:
        """Queue positions by Smith's ratio, as the greedy."""
        return wspt_order(instance)
