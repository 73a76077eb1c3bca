"""One round, one call: ``solve(instance, solver=...)`` -> :class:`Decision`."""

from __future__ import annotations

from dataclasses import replace

from whale_opt.decision import Decision
from whale_opt.policies import REGISTRY, get_policy
from whale_opt.problem_data import Instance

SOLVERS = tuple(REGISTRY)
SPLIT_ABOVE_GPUS = 2048


def solve(
    instance: Instance,
    solver: str = "wspt",
    *,
    preset: str | None = None,
    time_limit_s: float | None = None,
    split_above_gpus: int | None = SPLIT_ABOVE_GPUS,
) -> Decision:
    """Decide one round of ``instance`` with the named policy or solver.

    ``time_limit_s`` overrides the instance's policy; ``preset`` names a
    CP-SAT parameter preset (ignored by the heuristics). Clusters with more
    than ``split_above_gpus`` GPUs are cut into pools solved in parallel
    (:mod:`whale_opt.decompose`); None never splits.
    """
    if time_limit_s is not None:
        instance = instance.replace(policy=replace(instance.policy, time_limit_s=time_limit_s))
    policy = get_policy(solver, preset=preset)  # fail early on a bad name or preset
    gpus = sum(node.gpus for node in instance.nodes)
    if split_above_gpus is not None and gpus > split_above_gpus:
        from whale_opt.decompose import solve_split

        return solve_split(instance, solver, preset)
    return policy.decide(instance)
