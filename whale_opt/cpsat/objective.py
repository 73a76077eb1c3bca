"""The CP-SAT objective of a neighbourhood: the decision@1 objective of its jobs."""

from __future__ import annotations

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import Neighbourhood
from whale_opt.cpsat.variables import Variables

WEIGHT_SCALE = 1000  # weights are floats; the model needs integers


def scaled(weight: float) -> int:
    """A job weight as a model integer (at least 1)."""
    return max(1, round(weight * WEIGHT_SCALE))


class Objective:
    """Weighted completion + deferral at the horizon + zone penalties, exactly."""

    def __init__(self, model: cp_model.CpModel, hood: Neighbourhood, variables: Variables) -> None:
        self.model = model
        self.hood = hood
        self.vars = variables

    def add_objective(self) -> None:
        """Minimise the freed jobs' share of the decision@1 objective."""
        instance = self.hood.instance
        terms: list[cp_model.LinearExprT] = []
        for item, v in zip(self.hood.jobs, self.vars.jobs, strict=True):
            job = instance.queue[item.position]
            weight = scaled(job.weight)
            terms.append(weight * v.start)
            for gpu_type, lit in v.on_type.items():
                terms.append(weight * item.durations[gpu_type] * lit)
            terms.append(weight * instance.deferred_cost_end(item.position) * v.deferred)
            if v.outside is not None:
                terms.append(scaled(job.weight * instance.policy.zone_penalty_s) * v.outside)
        self.model.minimize(sum(terms))
