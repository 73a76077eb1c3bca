"""The CP-SAT objective: weighted completion, deferral and zone penalties."""

from __future__ import annotations

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import RoundData
from whale_opt.cpsat.variables import Variables

WEIGHT_SCALE = 1000  # weights are floats; the model needs integers


def scaled(weight: float) -> int:
    """A job weight as a model integer (at least 1)."""
    return max(1, round(weight * WEIGHT_SCALE))


class Objective:
    """Builds the objective expression (in weight units x WEIGHT_SCALE)."""

    def __init__(self, model: cp_model.CpModel, data: RoundData, variables: Variables) -> None:
        self.model = model
        self.data = data
        self.vars = variables

    def add_objective(self) -> None:
        """Minimise the decision@1 objective as the model sees it.

        The future zone penalty is unknown to the pooled model (no nodes yet),
        so it is left out: the model's value never exceeds the decoded one.
        """
        instance = self.data.instance
        terms: list[cp_model.LinearExprT] = []
        for item, v in zip(self.data.jobs, self.vars.jobs, strict=True):
            weight = scaled(instance.queue[item.position].weight)
            terms.append(weight * v.start)
            for gpu_type, present in v.present.items():
                terms.append(weight * item.durations[gpu_type] * present)
            terms.append(weight * instance.deferred_cost_end(item.position) * v.deferred)
            for option, lit in zip(item.options, v.options, strict=True):
                if option.penalty:
                    terms.append(round(option.penalty * WEIGHT_SCALE) * lit)
        self.model.minimize(sum(terms))

    def constant(self) -> float:
        """Objective of jobs outside the model (never servable: always deferred)."""
        instance = self.data.instance
        inside = {item.position for item in self.data.jobs}
        return sum(
            job.weight * instance.deferred_cost_end(k)
            for k, job in enumerate(instance.queue)
            if k not in inside
        )
