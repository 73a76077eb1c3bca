"""The one shape every policy and solver has."""

from __future__ import annotations

from typing import Protocol

from whale_opt.decision import Decision
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.problem_data import Instance


class SchedulingPolicy(Protocol):
    """One round in, one decision out. Every policy and solver has this shape."""

    name: str

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        """The decision for ``instance`` under ``options`` (default: ``SolveOptions()``)."""
        ...
