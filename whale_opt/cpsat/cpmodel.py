"""One neighbourhood as a CP-SAT model: build, solve under a watchdog, decode.

:class:`NeighbourhoodModel` wires the three parts of the model
(:class:`~whale_opt.cpsat.variables.Variables`,
:class:`~whale_opt.cpsat.constraints.Constraints`,
:class:`~whale_opt.cpsat.objective.Objective`), hints the incumbent, and
solves: the freed jobs (and the running jobs they may displace) are decided
exactly; every other job is fixed. A search that finds nothing returns None,
never raises.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import Neighbourhood
from whale_opt.cpsat.constraints import Constraints
from whale_opt.cpsat.objective import Objective
from whale_opt.cpsat.presets import Preset
from whale_opt.cpsat.solution import add_hint, decode
from whale_opt.cpsat.variables import Variables
from whale_opt.decision import Action, JobDecision, deferred_cost, objective
from whale_opt.patience import GapWatch, Patience

MIN_BUDGET_S = 0.01  # below this a CP-SAT call is not worth starting
WATCHDOG_SLACK_S = 0.01  # how long past its budget a search may run before it is stopped
WATCH_POLL_S = 0.02  # how often the watchdog looks at the round's patience
# Building a model cannot be stopped half way, so its cost is predicted first:
# about BUILD_MICROS_PER_JOB per freed job, BUILD_MICROS_PER_NODE per candidate
# node and BUILD_MICROS_PER_SET per GPU set to start on now (least squares on
# 51 whole-round models of 1 to 92 jobs on 8 to 157 nodes, idle 2-core machine;
# measured 0.45-1.8x of it). CP-SAT's presolve of a whole round's model then
# takes several times the build: its first solution came FIRST_SOLUTION_FACTOR
# times the predicted build after the start (median over 32 whole-round models:
# replay rounds of 3-27 jobs on 1,008 GPUs and generated rounds of 4-64 jobs;
# 1.5-15x). A whole round's model is built only when that first solution is
# expected within the time left for it: else the round's time goes to the
# searches that improve from the first second.
BUILD_MICROS_PER_JOB = 850.0
BUILD_MICROS_PER_NODE = 100.0
BUILD_MICROS_PER_SET = 12.5
FIRST_SOLUTION_FACTOR = 8.0
# Listing a whole round's choices (its neighbourhood, before any model) takes
# about HOOD_MICROS_PER_PAIR per (queued job, eligible node) pair: 10-36 us over
# 24 rounds of 16-64 jobs on 8-157 nodes (bench/EXACT.md). A pool of a split
# round given 0.05 s spent 0.2 s listing them, only for the gate to skip the model.
HOOD_MICROS_PER_PAIR = 30.0
# A whole round's model is presolved once: with the left-shift literals
# (Constraints._left_shifted) CP-SAT's later presolve passes took 1.1 s of a
# 12-job round its search then proved in 0.1 s. So presolved, the rounds of 12 and
# 16 jobs of bench/EXACT.md: 40 of 72 proven against 32 before the dominance, none
# lost, the same optima.
WHOLE_PARAMETERS: dict[str, Any] = {"max_presolve_iterations": 1}


class ModelRejected(ValueError):
    """CP-SAT refused a model as invalid; the message is its reason (numbers its
    64-bit arithmetic cannot hold: weights, aging and waits near their limits
    together can overflow the objective)."""


@dataclass(frozen=True)
class HoodResult:
    """A solved neighbourhood: the freed jobs' decisions, the victims it preempts,
    whether CP-SAT proved it optimal, what the model says it costs, the
    time CP-SAT took and CP-SAT's lower bound on the model (in objective units)."""

    decided: dict[int, JobDecision]
    preempted: frozenset[int]
    proved: bool
    value: float
    solve_s: float = 0.0
    bound: float = 0.0


def new_solver(parameters: dict[str, Any]) -> cp_model.CpSolver:
    """A CP-SAT solver with ``parameters`` set (a list extends a repeated field,
    such as ``subsolvers``)."""
    solver = cp_model.CpSolver()
    for key, value in parameters.items():
        if isinstance(value, list):
            getattr(solver.parameters, key).extend(value)
        else:
            setattr(solver.parameters, key, value)
    return solver


class NeighbourhoodModel:
    """The CP-SAT model of neighbourhood ``hood``, built and hinted on creation.

    Parameters
    ----------
    hood
        The freed jobs, their candidate placements, the victims they may
        displace and the fixed rest (:func:`whale_opt.cpsat.neighbourhood.make_neighbourhood`).
    whole
        The whole round's model: it also keeps to left-shifted schedules
        (:meth:`~whale_opt.cpsat.constraints.Constraints._left_shifted`).
    """

    def __init__(self, hood: Neighbourhood, *, whole: bool = False) -> None:
        self.hood = hood
        self.model = cp_model.CpModel()
        self.variables = Variables(self.model, hood)
        Constraints(self.model, hood, self.variables, whole=whole).add_constraints()
        self.objective = Objective(self.model, hood, self.variables)
        self.objective.add_objective()
        add_hint(self.model, hood, self.variables)

    def solve(
        self,
        parameters: dict[str, Any],
        time_limit_s: float,
        seed: int = 0,
        deterministic_s: float | None = None,
        patience: Patience | None = None,
        *,
        whole: bool = False,
    ) -> HoodResult | None:
        """Solve within ``time_limit_s`` wall seconds; None when no solution came.

        ``parameters`` are CP-SAT parameters; ``deterministic_s`` (when set)
        bounds the search by CP-SAT's deterministic time, so reruns agree.
        ``patience`` (when active) stops the search once it has gone that long
        without a better solution (or, ``whole``: the round's model, without
        its bound closing the gap); the better solutions restart its clock.
        """
        solver = new_solver(parameters)
        solver.parameters.max_time_in_seconds = time_limit_s
        solver.parameters.random_seed = seed % 2**31  # a 32-bit field: any seed maps into it
        if deterministic_s is not None:
            solver.parameters.max_deterministic_time = deterministic_s
        # CP-SAT can overshoot its own limit: a watchdog stops the search, at
        # the latest a little after the limit, earlier when patience runs out.
        hard = time.perf_counter() + time_limit_s + WATCHDOG_SLACK_S
        patience = patience or Patience()
        watch = GapWatch(patience)
        callback = _Progress(watch) if patience.active else None
        if callback is not None and whole:
            solver.best_bound_callback = watch.bound_rose
        done = threading.Event()
        watchdog = threading.Thread(target=_watch, args=(solver, done, hard, patience))
        watchdog.start()
        try:
            status = solver.solve(self.model, callback)
        finally:
            done.set()
            watchdog.join()
        if status == cp_model.MODEL_INVALID:
            raise ModelRejected(self.model.validate() or solver.solution_info())
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        decided, preempted = decode(self.hood, self.variables, solver)
        proved = status == cp_model.OPTIMAL
        return HoodResult(
            decided,
            preempted,
            proved,
            self.objective.value(solver),
            solver.wall_time,
            self.objective.bound(solver),
        )


def solve_neighbourhood(
    hood: Neighbourhood,
    parameters: dict[str, Any],
    deadline: float,
    preset: Preset,
    round_no: int,
    seed: int = 0,
    *,
    whole: bool = False,
    patience: Patience | None = None,
) -> HoodResult | None:
    """Solve the freed jobs (and victims) exactly, by ``deadline`` (a
    :func:`time.perf_counter` instant) and within the preset's per-call
    limit; None when nothing is freed or no solution came in time.

    ``whole``: the whole round's model, bound only by ``deadline`` (and, with a
    deterministic preset, by ``exact_deterministic_s``). ``patience``: the
    round's, which may stop the search earlier (:meth:`NeighbourhoodModel.solve`)."""
    if not hood.jobs:
        return None
    patience = patience or Patience()
    if whole:  # until the model's first solution: building and presolving it are not search
        patience.pause()
    try:
        return _solve(hood, parameters, deadline, preset, seed + round_no, whole, patience)
    finally:
        patience.resume()


def _solve(
    hood: Neighbourhood,
    parameters: dict[str, Any],
    deadline: float,
    preset: Preset,
    seed: int,
    whole: bool,
    patience: Patience,
) -> HoodResult | None:
    """:func:`solve_neighbourhood`, once there is something to solve."""
    built = NeighbourhoodModel(hood, whole=whole)
    # The budget is taken after building: the model's own build time counts.
    budget = deadline - time.perf_counter()
    if not whole:
        budget = min(budget, preset.round_limit_s)
    if budget <= MIN_BUDGET_S:
        return None
    deterministic_s = None
    if preset.deterministic:
        deterministic_s = preset.exact_deterministic_s if whole else preset.lns_deterministic_s
    if whole:
        parameters = {**parameters, **WHOLE_PARAMETERS}
    return built.solve(parameters, budget, seed, deterministic_s, patience, whole=whole)


class _Progress(cp_model.CpSolverSolutionCallback):
    """Feeds each solution's objective to a :class:`GapWatch`."""

    def __init__(self, watch: GapWatch) -> None:
        super().__init__()
        self.watch = watch

    def on_solution_callback(self) -> None:
        self.watch.solution(self.objective_value)


def _watch(
    solver: cp_model.CpSolver, done: threading.Event, hard: float, patience: Patience
) -> None:
    """Stop ``solver`` at ``hard`` (a :func:`time.perf_counter` instant) or once
    ``patience`` runs out, unless ``done`` is set first."""
    # Polled: the patience's end moves with every solution (and is unknown while
    # paused); without a patience one wait until ``hard`` does.
    poll = WATCH_POLL_S if patience.active else math.inf
    while not done.wait(min(poll, max(0.0, patience.stop_at(hard) - time.perf_counter()))):
        if patience.over(hard):
            solver.stop_search()
            return


def model_build_seconds(jobs: int, nodes: int, sets: int = 0) -> float:
    """The expected time to build a model of ``jobs`` freed jobs with ``nodes``
    candidate nodes and ``sets`` GPU sets to start on now between them
    (:data:`BUILD_MICROS_PER_JOB`, ``_PER_NODE`` and ``_PER_SET``)."""
    micros = (
        BUILD_MICROS_PER_JOB * jobs + BUILD_MICROS_PER_NODE * nodes + BUILD_MICROS_PER_SET * sets
    )
    return micros * 1e-6


def whole_round_seconds(jobs: int, pairs: int) -> float:
    """When a whole round's model of ``jobs`` queued jobs with ``pairs`` (job,
    eligible node) pairs is expected to give its first solution, known before
    its choices are listed: listing them, then :data:`FIRST_SOLUTION_FACTOR`
    times its build with every eligible node a candidate (no start-now sets)."""
    listing = HOOD_MICROS_PER_PAIR * pairs * 1e-6
    return listing + FIRST_SOLUTION_FACTOR * model_build_seconds(jobs, pairs)


def build_seconds(hood: Neighbourhood) -> float:
    """The expected time to build ``hood``'s model (:func:`model_build_seconds`)."""
    nodes = sum(len(item.nodes) for item in hood.jobs)
    sets = sum(len(masks) for item in hood.jobs for masks in item.now_masks.values())
    return model_build_seconds(len(hood.jobs), nodes, sets)


def freed_share(
    hood: Neighbourhood, decided: dict[int, JobDecision], preempted: frozenset[int]
) -> float:
    """The share of the decision@1 objective of a neighbourhood's freed jobs (as
    ``decided``) and victims (those in ``preempted`` preempted)."""
    instance = hood.instance
    freed = {item.position for item in hood.jobs}
    items = [decided[k] for k in sorted(freed)]
    items += [
        JobDecision(instance.running[v.position].id, Action.PREEMPT)
        for v in hood.victims
        if v.position in preempted
    ]
    return objective(instance, items) - outside_cost(hood)


def outside_cost(hood: Neighbourhood) -> float:
    """What the queued jobs outside the model cost deferred (the objective prices
    every job left out of a decision so)."""
    instance = hood.instance
    freed = {item.position for item in hood.jobs}
    return sum(deferred_cost(instance, k) for k in range(len(instance.queue)) if k not in freed)
