"""One round, one call: ``solve(instance, solver=...)`` -> :class:`Decision`."""

from __future__ import annotations

from dataclasses import replace

from whale_opt.decision import Decision
from whale_opt.policies import REGISTRY, get_policy
from whale_opt.problem_data import Instance

SOLVERS = tuple(REGISTRY)


def solve(
    instance: Instance,
    solver: str = "wspt",
    *,
    preset: str | None = None,
    time_limit_s: float | None = None,
) -> Decision:
    """Decide one round of ``instance`` with the named policy or solver.

    ``time_limit_s`` overrides the instance's policy; ``preset`` names a
    CP-SAT parameter preset (ignored by the heuristics).
    """
    if time_limit_s is not None:
        instance = instance.replace(policy=replace(instance.policy, time_limit_s=time_limit_s))
    policy = get_policy(solver, preset=preset)
    return policy.decide(instance)
