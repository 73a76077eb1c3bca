"""A policy that keeps the rounds it decides: replay once, study the rounds after.

What-if studies and benchmarks sample a replay's rounds (as a policy saw
them) and decide them again in other ways; :class:`KeepRounds` wraps any
policy for :func:`whale_opt.sim.simulate` and keeps each round's instance.
"""

from __future__ import annotations

from whale_opt.decision import Decision
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.policies.protocol import SchedulingPolicy
from whale_opt.problem_data import Instance


class KeepRounds:
    """Decides as ``policy`` does, keeping in :attr:`rounds` every round's instance
    with at least ``least`` queued jobs."""

    def __init__(self, policy: SchedulingPolicy, least: int = 0) -> None:
        self.policy = policy
        self.name = policy.name
        self.least = least
        self.rounds: list[Instance] = []

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        """``policy``'s decision, the round kept."""
        if len(instance.queue) >= self.least:
            self.rounds.append(instance)
        return self.policy.decide(instance, options)
