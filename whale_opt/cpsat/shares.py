"""The CP-SAT rules of shares of one GPU (``gpu_milli`` < 1000) started now.

A freed share that starts now takes one GPU from its list (one-GPU sets in
``now_masks``): a GPU other shares are on, or a free one. On each GPU the
shares it already holds, plus the freed shares that take it, stay within 1000
milli, and a freed whole-GPU job's exact set takes it only if no freed share
does. A GPU with shares counts as one whole GPU of its node until its last
share ends: the fixed timeline counts it until the end of the shares already
on it, and an interval here counts it on from there until the end of the
longest freed share that takes it. A share planned later counts as its
fraction of a GPU (the variables' ``planned`` intervals), as the checker
counts it.
"""

from __future__ import annotations

from collections import defaultdict

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import Neighbourhood
from whale_opt.problem_data import MILLI

Uses = list[tuple[cp_model.IntervalVar, cp_model.LinearExprT]]


class ShareGpus:
    """The freed shares that may take each GPU now, and the rules over them."""

    def __init__(self, model: cp_model.CpModel, hood: Neighbourhood) -> None:
        self.model = model
        self.hood = hood
        # (node, GPU index) -> (literal, milli, duration) of each freed share that may take it
        self.takers: dict[tuple[int, int], list[tuple[cp_model.IntVar, int, int]]] = defaultdict(
            list
        )

    def add(self, node: int, index: int, lit: cp_model.IntVar, milli: int, duration: int) -> None:
        """A freed share of ``milli`` running ``duration`` takes GPU ``index`` of ``node``
        now when ``lit`` holds."""
        self.takers[(node, index)].append((lit, milli, duration))

    def constrain(self, whole: dict[tuple[int, int], list[cp_model.IntVar]]) -> dict[int, Uses]:
        """Room on every GPU (``whole``: freed whole-GPU sets that take it); returns, per
        node, the intervals over which GPUs opened by freed shares count whole."""
        opened: dict[int, Uses] = defaultdict(list)
        for (node, index), shares in self.takers.items():
            used, last = self.hood.timeline.shares_now(node).get(index, (0, 0))
            self.model.add(
                sum(milli * lit for lit, milli, _ in shares)
                + MILLI * sum(whole.get((node, index), []))
                <= MILLI - used
            )
            longest = max(duration for _, _, duration in shares)
            if longest <= last:
                continue  # the GPU already counts whole for longer than any of them runs
            end = self.model.new_int_var(last, longest, f"shared_until_{node}_{index}")
            for lit, _, duration in shares:
                if duration > last:
                    self.model.add(end >= duration).only_enforce_if(lit)
            interval = self.model.new_interval_var(last, end - last, end, "")
            opened[node].append((interval, MILLI))
        return opened
