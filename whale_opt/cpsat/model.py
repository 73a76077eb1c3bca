"""The CP-SAT round solver: greedy hint, exact now, pooled future, best of both.

``CpSatPolicy.decide`` runs the WSPT greedy, builds the model (variables,
constraints, objective), hints it with the greedy's schedule, solves under a
watchdog that stops the search at the time limit, decodes (starts from the
model; the rest list-scheduled in the model's start order) and returns the
better of the decoded and the greedy decisions, with an honest bound.
"""

from __future__ import annotations

import logging
import math
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
from whale_opt.cpsat.objective import WEIGHT_SCALE, Objective
from whale_opt.cpsat.variables import Variables
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.policies.base import assemble, deferral_reason, list_schedule, to_job_decision
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.timeline import ClusterTimeline, Placement
from whale_opt.topology import choose_gpus, needs_nvlink

log = logging.getLogger("whale_opt")

PRESET_DIR = Path(__file__).resolve().parents[2] / "solvers"
DEFAULT_PARAMETERS: dict[str, Any] = {
    "num_workers": 2,
    "cp_model_probing_level": 0,
    "symmetry_level": 1,
}


def load_preset(name: str | None) -> dict[str, Any]:
    """CP-SAT parameters of preset ``name`` (``solvers/<name>.toml``; None: defaults)."""
    if name is None:
        name = "default"
    path = PRESET_DIR / f"{name}.toml"
    if not path.exists():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
        if name == "default" and not known:
            return dict(DEFAULT_PARAMETERS)
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(known)}")
    with path.open("rb") as stream:
        loaded = tomllib.load(stream)
    return {**DEFAULT_PARAMETERS, **loaded.get("parameters", {})}


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
        self.parameters = {**load_preset(preset), **overrides}
        self.stats = SolveStats()

    def decide(self, instance: Instance) -> Decision:
        """The round's decision: the better of CP-SAT's and the greedy's."""
        started = time.perf_counter()
        limit = instance.policy.time_limit_s
        greedy_jobs = list_schedule(instance, wspt_order(instance))
        greedy_value = objective(instance, greedy_jobs)
        analytic = lower_bound(instance)
        self.stats = SolveStats()
        remaining = limit - (time.perf_counter() - started)
        jobs, bound = greedy_jobs, analytic
        if instance.queue and remaining > 0.05 * limit:
            found = self._solve(instance, greedy_jobs, started, limit)
            if found is not None:
                model_jobs, model_bound = found
                if model_bound is not None:
                    bound = max(bound, model_bound)
                if objective(instance, model_jobs) < greedy_value - 1e-9:
                    jobs = model_jobs
                    self.stats.improved = True
        value = objective(instance, jobs)
        gap = (value - bound) / max(value, 1.0)
        if gap <= 1e-9:
            status = Status.OPTIMAL
        elif self.stats.improved:
            status = Status.FEASIBLE
        else:
            status = Status.GREEDY_FALLBACK
        return assemble(instance, self.name, jobs, status, bound, started)

    def _solve(
        self, instance: Instance, greedy_jobs: list[JobDecision], started: float, limit: float
    ) -> tuple[list[JobDecision], float | None] | None:
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
        # Keep a margin for decoding: about 2 ms per job, at least 5% of the limit.
        budget = limit - (time.perf_counter() - started) - max(0.05 * limit, 0.002 * len(data.jobs))
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
        return _decode(data, variables, solver), bound


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


def _decode(data: RoundData, variables: Variables, solver: cp_model.CpSolver) -> list[JobDecision]:
    """Starts from the model with exact GPUs; the rest list-scheduled in model order."""
    instance = data.instance
    timeline = ClusterTimeline(instance)
    decided: dict[int, JobDecision] = {}
    counted: list[tuple[int, str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
    later: list[tuple[int, float, int]] = []
    for item, v in zip(data.jobs, variables.jobs, strict=True):
        if solver.boolean_value(v.deferred):
            later.append((1, math.inf, item.position))
            continue
        if not solver.boolean_value(v.now):
            later.append((0, solver.value(v.start), item.position))
            continue
        for option, lit in zip(item.options, v.options, strict=True):
            if solver.boolean_value(lit):
                counted.append(
                    (item.position, option.gpu_type, option.nodes, option.counts, option.masks)
                )
        for (gpu_type, _, size), rack, rack_nodes in zip(
            item.gangs, v.gang_racks, v.gang_nodes, strict=True
        ):
            if solver.boolean_value(rack):
                chosen = tuple(n for n, lit in rack_nodes.items() if solver.boolean_value(lit))
                counted.append((item.position, gpu_type, chosen, (size,) * len(chosen), ()))
        for (gpu_type, _), group, group_counts in zip(
            item.spread, v.spread_groups, v.spread_counts, strict=True
        ):
            if solver.boolean_value(group):
                pairs = [
                    (n, solver.value(c)) for n, c in group_counts.items() if solver.value(c) > 0
                ]
                counted.append(
                    (
                        item.position,
                        gpu_type,
                        tuple(n for n, _ in pairs),
                        tuple(c for _, c in pairs),
                        (),
                    )
                )
    # Exact GPU sets first, then the count-only choices take what is left.
    counted.sort(key=lambda entry: (not entry[4], -sum(entry[3])))
    for position, gpu_type, nodes, counts, masks in counted:
        job = instance.queue[position]
        chosen_masks = list(masks)
        if not chosen_masks:
            for node, count in zip(nodes, counts, strict=True):
                nvlink = needs_nvlink(job) and len(nodes) == 1
                mask = choose_gpus(
                    timeline.topologies[node], timeline.free_now[node], count, nvlink
                )
                if mask is None:
                    break
                chosen_masks.append(mask)
        if len(chosen_masks) != len(nodes):
            later.append((0, 0, position))  # could not realise: schedule it like the rest
            continue
        duration = instance.durations[position][gpu_type]
        now = Placement(0, duration, gpu_type, nodes, counts, tuple(chosen_masks))
        timeline.commit(position, now)
        decided[position] = to_job_decision(instance, position, now)
    later.sort(key=lambda entry: (entry[0], entry[1], entry[2]))
    for _, _, position in later:
        placement = timeline.best_placement(position)
        if placement is None or placement.end > instance.deferred_cost_end(position):
            decided[position] = JobDecision(
                instance.queue[position].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, position, timeline),
            )
            continue
        timeline.commit(position, placement)
        decided[position] = to_job_decision(instance, position, placement)
    jobs = [
        decided.get(k)
        or JobDecision(job.id, Action.DEFERRED, reason=deferral_reason(instance, k, timeline))
        for k, job in enumerate(instance.queue)
    ]
    jobs += [JobDecision(job.id, Action.KEEP) for job in instance.running]
    return jobs
