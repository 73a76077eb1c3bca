"""The CP-SAT round solver: greedy hint, exact now, pooled future, best of both.

``CpSatPolicy.decide`` runs the WSPT greedy, builds the model (variables,
constraints, objective), hints it with the greedy's schedule, solves under a
watchdog that stops the search at the time limit, decodes (starts from the
model; the rest list-scheduled in the model's start order) and returns the
better of the decoded and the greedy decisions, with an honest bound.
"""

from __future__ import annotations

import logging
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ortools.sat.python import cp_model

from whale_opt.bounds import lower_bound
from whale_opt.cpsat.candidates import RoundData, build_round
from whale_opt.cpsat.constraints import Constraints
from whale_opt.cpsat.decode import best_decode, extract
from whale_opt.cpsat.objective import WEIGHT_SCALE, Objective
from whale_opt.cpsat.variables import Variables
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.policies.base import assemble, list_schedule
from whale_opt.policies.search import decision_order, improve
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance

log = logging.getLogger("whale_opt")

PRESET_DIR = Path(__file__).resolve().parents[2] / "solvers"
DEFAULT_PARAMETERS: dict[str, Any] = {
    "num_workers": 2,
    "cp_model_probing_level": 0,
    "symmetry_level": 1,
}


@dataclass(frozen=True)
class Preset:
    """A named configuration: CP-SAT parameters and how the round spends its time.

    ``cpsat_share`` is the fraction of the time left after the greedy that
    CP-SAT gets; the rest goes to the list-order local search (0: search
    only, 1: CP-SAT only).
    """

    name: str
    parameters: dict[str, Any]
    cpsat_share: float = 0.5


def load_preset(name: str | None) -> Preset:
    """Preset ``name`` from ``solvers/<name>.toml`` (None: ``default``)."""
    name = name or "default"
    path = PRESET_DIR / f"{name}.toml"
    if not path.exists():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
        if name == "default" and not known:
            return Preset(name, dict(DEFAULT_PARAMETERS))
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(known)}")
    with path.open("rb") as stream:
        loaded = tomllib.load(stream)
    share = float(loaded.get("round", {}).get("cpsat_share", 0.5))
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{path}: round.cpsat_share must be in 0..1, got {share}")
    return Preset(name, {**DEFAULT_PARAMETERS, **loaded.get("parameters", {})}, share)


@dataclass
class SolveStats:
    """What the last solve did (for benchmarks and logs)."""

    build_s: float = 0.0
    solve_s: float = 0.0
    first_solution_s: float | None = None
    cpsat_status: str = ""
    model_objective: float | None = None
    model_bound: float | None = None
    exact: bool = False
    improved: bool = False
    greedy_value: float = 0.0
    cpsat_value: float | None = None
    sizes: dict[str, int] = field(default_factory=dict)


class _FirstSolution(cp_model.CpSolverSolutionCallback):
    def __init__(self, started: float) -> None:
        super().__init__()
        self.started = started
        self.first: float | None = None

    def on_solution_callback(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.started


class CpSatPolicy:
    """Exact CP-SAT round model, never worse than the greedy."""

    name = "cpsat"

    def __init__(self, preset: str | None = None, **overrides: Any) -> None:
        self.preset = load_preset(preset)
        self.parameters = {**self.preset.parameters, **overrides}
        self.stats = SolveStats()

    def decide(self, instance: Instance) -> Decision:
        """The round's decision: the best of the greedy, CP-SAT and the order search."""
        started = time.perf_counter()
        deadline = started + instance.policy.time_limit_s
        greedy_order = wspt_order(instance)
        greedy_jobs = list_schedule(instance, greedy_order)
        greedy_value = objective(instance, greedy_jobs)
        bound = lower_bound(instance)
        self.stats = SolveStats(greedy_value=greedy_value)
        jobs, value = greedy_jobs, greedy_value
        orders = [greedy_order]
        spare = deadline - time.perf_counter()
        if instance.queue and spare > 0.05 * instance.policy.time_limit_s:
            found = self._solve(
                instance, greedy_jobs, time.perf_counter() + spare * self.preset.cpsat_share
            )
            if found is not None:
                model_jobs, model_bound = found
                if model_bound is not None:
                    bound = max(bound, model_bound)
                self.stats.cpsat_value = objective(instance, model_jobs)
                orders.append(decision_order(model_jobs, instance))
                if self.stats.cpsat_value < value:
                    jobs, value = model_jobs, self.stats.cpsat_value
            if bound < value - 1e-9 and self.preset.cpsat_share < 1.0:
                # Keep ~3% of the limit for assembling the decision.
                stop = deadline - 0.03 * instance.policy.time_limit_s
                found_jobs, found_value = improve(instance, orders, stop, instance.policy.seed)
                if found_value < value:
                    jobs, value = found_jobs, found_value
        self.stats.improved = value < greedy_value - 1e-9
        if (value - bound) / max(value, 1.0) <= 1e-9:
            status = Status.OPTIMAL
        elif self.stats.improved:
            status = Status.FEASIBLE
        else:
            status = Status.GREEDY_FALLBACK
        return assemble(instance, self.name, jobs, status, bound, started)

    def _solve(
        self, instance: Instance, greedy_jobs: list[JobDecision], deadline: float
    ) -> tuple[list[JobDecision], float | None] | None:
        """CP-SAT until ``deadline``: its decoded decision and, if valid, its bound."""
        started = time.perf_counter()
        greedy = {item.id: item for item in greedy_jobs}
        data = build_round(instance, greedy)
        model = cp_model.CpModel()
        variables = Variables(model, data)
        Constraints(model, data, variables).add_constraints()
        goal = Objective(model, data, variables)
        goal.add_objective()
        _hint(model, data, variables, greedy)
        self.stats.build_s = time.perf_counter() - started
        self.stats.exact = data.exact
        self.stats.sizes = {
            "jobs": len(data.jobs),
            "options": sum(len(item.options) for item in data.jobs),
            "variables": len(model.proto.variables),
            "constraints": len(model.proto.constraints),
        }
        # Keep a margin for decoding: about 3 decodes of the greedy's cost.
        budget = deadline - time.perf_counter() - 0.002 * len(data.jobs)
        if budget <= 0.05:
            return None
        solver = cp_model.CpSolver()
        for key, value in self.parameters.items():
            setattr(solver.parameters, key, value)
        solver.parameters.max_time_in_seconds = budget
        solver.parameters.random_seed = instance.policy.seed
        callback = _FirstSolution(started)
        # CP-SAT can overshoot its own limit: a watchdog stops the search.
        watchdog = threading.Timer(budget * 1.02, solver.stop_search)
        watchdog.start()
        try:
            status = solver.solve(model, callback)
        finally:
            watchdog.cancel()
        self.stats.solve_s = solver.wall_time
        self.stats.first_solution_s = callback.first
        self.stats.cpsat_status = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        constant = goal.constant()
        self.stats.model_objective = solver.objective_value / WEIGHT_SCALE + constant
        bound = None
        if data.exact and _integral_weights(instance):
            # The model is a relaxation (exact now, pooled future): its bound holds.
            bound = solver.best_objective_bound / WEIGHT_SCALE + constant
            self.stats.model_bound = bound
        return best_decode(data, extract(data, variables, solver)), bound


def _integral_weights(instance: Instance) -> bool:
    return all(
        abs(job.weight * WEIGHT_SCALE - round(job.weight * WEIGHT_SCALE)) < 1e-9
        for job in instance.queue
    )


def _hint(
    model: cp_model.CpModel, data: RoundData, variables: Variables, greedy: dict[str, JobDecision]
) -> None:
    """The greedy's schedule as a (complete where it maps) solution hint."""
    instance = data.instance
    for item, v in zip(data.jobs, variables.jobs, strict=True):
        decided = greedy[instance.queue[item.position].id]
        deferred = decided.action is Action.DEFERRED
        now = decided.action is Action.START
        model.add_hint(v.deferred, deferred)
        model.add_hint(v.now, now)
        model.add_hint(v.start, 0 if deferred or now else decided.start_s or 0)
        gpu_type = None
        nodes: tuple[str, ...] = ()
        if now:
            nodes = tuple(dict.fromkeys(g.rpartition("/")[0] for g in decided.gpus))
        elif decided.action is Action.PLANNED:
            nodes = decided.nodes
        if nodes:
            gpu_type = instance.nodes[instance.node_index[nodes[0]]].gpu_type
        for name, present in v.present.items():
            model.add_hint(present, name == gpu_type)
        chosen = _greedy_option(data, item.position, decided) if now else None
        for o, lit in enumerate(v.options):
            model.add_hint(lit, o == chosen)


def _greedy_option(data: RoundData, position: int, decided: JobDecision) -> int | None:
    instance = data.instance
    item = next(it for it in data.jobs if it.position == position)
    masks: dict[int, int] = {}
    for gpu in decided.gpus:
        ref = instance.parse_gpu(gpu)
        masks[ref.node] = masks.get(ref.node, 0) | (1 << ref.index)
    for o, option in enumerate(item.options):
        if set(option.nodes) == set(masks) and (
            not option.masks
            or all(masks[n] == m for n, m in zip(option.nodes, option.masks, strict=True))
        ):
            return o
    return None
