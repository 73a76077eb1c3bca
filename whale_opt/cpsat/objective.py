"""The CP-SAT objective of a neighbourhood: the decision@1 objective of its jobs.

Per freed job, its effective weight (:attr:`Instance.weights`) times a
linear expression in seconds: its end (or, deferred, the horizon plus its
shortest duration) plus the prices of the soft preferences its candidate
drops (:class:`~whale_opt.cpsat.candidates.Prices`), and the GPU-second
price of the type it runs on (:meth:`Instance.usage_price`); per victim, its
preemption cost (:func:`whale_opt.decision.preemption_cost`) when preempted.
Weights are scaled to integers; :meth:`Objective.value` re-prices a solution
with the exact weights, which is what the decoded decision must cost.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import FreeJob, Mode, Neighbourhood
from whale_opt.cpsat.variables import JobVars, Variables
from whale_opt.decision import deferred_usage, preemption_cost

WEIGHT_SCALE = 1000  # weights are floats; the model needs integers


def scaled(weight: float) -> int:
    """A job weight as a model integer (at least 1)."""
    return max(1, round(weight * WEIGHT_SCALE))


class Objective:
    """Weighted completion + deferral at the horizon + preference and preemption prices."""

    def __init__(self, model: cp_model.CpModel, hood: Neighbourhood, variables: Variables) -> None:
        self.model = model
        self.hood = hood
        self.vars = variables
        self.seconds: list[cp_model.LinearExprT] = []
        self.usage: list[tuple[float, cp_model.IntVar]] = []  # (GPU-second price, on its type)

    def add_objective(self) -> None:
        """Minimise the freed jobs' and victims' share of the decision@1 objective."""
        instance = self.hood.instance
        terms: list[cp_model.LinearExprT] = []
        for item, v in zip(self.hood.jobs, self.vars.jobs, strict=True):
            seconds = self._job_seconds(item, v)
            self.seconds.append(seconds)
            terms.append(scaled(instance.weights[item.position]) * seconds)
            usage = [(instance.usage_price(item.position, t), lit) for t, lit in v.on_type.items()]
            usage.append((deferred_usage(instance, item.position), v.deferred))
            for price, lit in usage:
                if price:
                    self.usage.append((price, lit))
                    # Rounded down, so the model never prices above the exact
                    # objective and its bound stays one.
                    terms.append(math.floor(price * WEIGHT_SCALE) * lit)
        for victim, w in zip(self.hood.victims, self.vars.victims, strict=True):
            job = instance.running[victim.position]
            lost = job.lost_on_preempt_s + job.checkpoint_s
            terms.append(scaled(instance.running_weights[victim.position]) * lost * (1 - w.kept))
        self.model.minimize(sum(terms))

    def bound(self, solver: cp_model.CpSolver) -> float:
        """CP-SAT's lower bound on the model, in the decision@1 objective's units: each
        term's model weight is at most ``scaled(w) / w`` times its exact one."""
        instance = self.hood.instance
        weights = [instance.weights[item.position] for item in self.hood.jobs]
        weights += [instance.running_weights[victim.position] for victim in self.hood.victims]
        ratio = min((w * WEIGHT_SCALE / scaled(w) for w in weights if w > 0), default=1.0)
        return max(0.0, solver.best_objective_bound) * min(1.0, ratio) / WEIGHT_SCALE

    def _job_seconds(self, item: FreeJob, v: JobVars) -> cp_model.LinearExprT:
        """The job's end, or deferred cost end, plus its preference prices, in seconds."""
        instance = self.hood.instance
        prices = item.prices
        terms: list[cp_model.LinearExprT] = [v.start]
        terms += [item.durations[gpu_type] * lit for gpu_type, lit in v.on_type.items()]
        terms.append(instance.deferred_cost_end(item.position) * v.deferred)
        if item.mode is Mode.SINGLE:
            terms += [prices.node[n] * lit for n, lit in v.on_node.items() if prices.node[n]]
            for n, lits in v.mask.items():
                for price, lit in zip(prices.mask[n], lits, strict=True):
                    if price != prices.node[n]:
                        terms.append((price - prices.node[n]) * lit)
            return sum(terms)
        terms += [prices.gpu_type[t] * lit for t, lit in v.on_type.items() if t in prices.gpu_type]
        if v.outside is not None:
            terms.append(prices.zone * v.outside)
        if v.shaped is not None:
            terms.append(prices.nvlink * (1 - v.deferred - v.shaped))
        return sum(terms)

    def value(self, solver: cp_model.CpSolver) -> float:
        """The solution's share of the decision@1 objective, with exact weights."""
        instance = self.hood.instance
        total = 0.0
        for item, seconds in zip(self.hood.jobs, self.seconds, strict=True):
            total += instance.weights[item.position] * solver.value(seconds)
        total += sum(price for price, lit in self.usage if solver.boolean_value(lit))
        for victim, w in zip(self.hood.victims, self.vars.victims, strict=True):
            if not solver.boolean_value(w.kept):
                total += preemption_cost(instance, victim.position)
        return total
