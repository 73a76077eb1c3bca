"""The CP-SAT round solver: greedy first, then exact large neighbourhood search.

``CpSatPolicy.decide``:

1. The WSPT greedy gives a complete decision (the hint and the fallback).
2. A local search over list-scheduling orders improves it cheaply.
3. CP-SAT large neighbourhood search: repeatedly free a few jobs (those
   starting now, a window of planned starts, one GPU type, ...), fix every
   other job, and solve the freed jobs *exactly* (per-node GPU / CPU /
   memory cumulatives over time, exact NVLink sets for what starts now,
   gangs, racks, quotas, soft preferences at their prices) with the
   incumbent as a complete hint. When preemption is allowed, the running
   jobs the freed ones may displace become optional too
   (:mod:`whale_opt.cpsat.victims`): kept, or preempted at their price for
   a displacing job started on their GPUs. Every solution decodes into a
   valid decision; improvements are kept.

The greedy is the WSPT policy's own schedule, preemptions included, so the
round is never worse than ``wspt``. The objective is the decision's
(:func:`whale_opt.decision.objective`): effective weights, preference and
preemption prices; each decoded neighbourhood is re-priced by it and must
cost what the model optimised (``SolveStats.pricing_gap``).

The time limit is a hard wall: each CP-SAT call gets what is left, and a
watchdog stops a search that overshoots. The status is ``optimal`` when the
objective meets the proven lower bound, ``feasible`` when the greedy was
improved, ``greedy-fallback`` otherwise.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ortools.sat.python import cp_model

from whale_opt.bounds import reported_bound
from whale_opt.check import check
from whale_opt.cpsat.candidates import Neighbourhood
from whale_opt.cpsat.constraints import Constraints
from whale_opt.cpsat.neighbourhood import STRATEGIES as STRATEGIES
from whale_opt.cpsat.neighbourhood import choose_neighbourhood as choose_neighbourhood
from whale_opt.cpsat.neighbourhood import make_neighbourhood as make_neighbourhood
from whale_opt.cpsat.objective import Objective
from whale_opt.cpsat.solution import add_hint, decode
from whale_opt.cpsat.variables import Variables
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.placement.order_search import improve
from whale_opt.placement.preempt import improve_by_preemption
from whale_opt.placement.serial import assemble, complete, list_schedule
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance
from whale_opt.rules import preemptible_now
from whale_opt.topology import node_topologies

log = logging.getLogger("whale_opt")
FINISH_S_PER_JOB = 60e-6  # assembling and checking a decision, per job (measured: 20-50 us)

PRESET_DIR = Path(__file__).resolve().parents[2] / "solvers"
DEFAULT_PARAMETERS: dict[str, Any] = {"num_workers": 1, "cp_model_probing_level": 0}


@dataclass(frozen=True)
class Preset:
    """A named configuration: CP-SAT parameters and how the round spends its time.

    ``search_share``: fraction of the time after the greedy given to the
    order search (the rest goes to CP-SAT LNS); ``hood_size``: jobs freed
    per neighbourhood at first (adapted as it goes); ``nodes_per_job``:
    candidate nodes per freed job; ``deterministic``: fixed move and round
    counts and CP-SAT deterministic time, so reruns are identical
    (``search_moves``, ``lns_rounds``, ``lns_deterministic_s``).
    """

    name: str
    parameters: dict[str, Any]
    search_share: float = 0.3
    hood_size: int = 24
    nodes_per_job: int = 6
    deterministic: bool = False
    search_moves: int = 200
    lns_rounds: int = 20
    lns_deterministic_s: float = 0.2
    round_limit_s: float = 0.5


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
    knobs = loaded.get("round", {})
    unknown = set(knobs) - (set(Preset.__dataclass_fields__) - {"name", "parameters"})
    if unknown:
        raise ValueError(f"{path}: unknown [round] keys {sorted(unknown)}")
    return Preset(name, {**DEFAULT_PARAMETERS, **loaded.get("parameters", {})}, **knobs)


@dataclass
class SolveStats:
    """What the last round did (for benchmarks, logs and tests).

    ``pricing_gap``: the largest excess of a decoded neighbourhood's cost
    (re-priced by :func:`whale_opt.decision.objective`) over what the model
    optimised (<= 0 up to rounding when the model prices exactly; below 0
    when the decoder did better than the model assumed). ``proven_gap``: the
    largest absolute difference on neighbourhoods CP-SAT proved optimal.
    """

    greedy_value: float = 0.0
    greedy_s: float = 0.0
    search_value: float | None = None
    lns_rounds: int = 0
    lns_improvements: int = 0
    lns_optimal: int = 0
    sizes: list[int] = field(default_factory=list)
    victims: list[int] = field(default_factory=list)
    pricing_gap: float = float("-inf")
    proven_gap: float = 0.0
    fallback: bool = False


@dataclass
class HoodResult:
    """A solved neighbourhood: the freed jobs' decisions, the victims it preempts,
    whether CP-SAT proved it optimal, what the model says it costs and the
    time CP-SAT took."""

    decided: dict[int, JobDecision]
    preempted: frozenset[int]
    proved: bool
    value: float
    solve_s: float = 0.0


class CpSatPolicy:
    """Greedy, order search and exact CP-SAT neighbourhoods; never worse than the greedy."""

    name = "cpsat"

    def __init__(self, preset: str | None = None, **overrides: Any) -> None:
        self.preset = load_preset(preset)
        self.parameters = {**self.preset.parameters, **overrides}
        self.stats = SolveStats()

    def decide(self, instance: Instance) -> Decision:
        """The round's decision (see the module docstring)."""
        started = time.perf_counter()
        limit = instance.policy.time_limit_s
        # Room to assemble and check the decision (both linear in the jobs).
        finish = min(0.05, 0.03 * limit) + FINISH_S_PER_JOB * (
            len(instance.queue) + len(instance.running)
        )
        deadline = started + limit - finish
        greedy_order = wspt_order(instance)
        greedy = list_schedule(instance, greedy_order, prefer=WsptPolicy.prefer)
        greedy = improve_by_preemption(instance, greedy_order, greedy, prefer=WsptPolicy.prefer)
        jobs, value = greedy, objective(instance, greedy)
        self.stats = SolveStats(greedy_value=value, greedy_s=time.perf_counter() - started)
        bound = reported_bound(instance)
        preset = self.preset
        if instance.queue and bound < value - 1e-9:
            spare = deadline - time.perf_counter()
            stop = time.perf_counter() + spare * preset.search_share
            moves = None
            if preset.deterministic:  # counted moves, not time, decide when to stop
                stop, moves = deadline, preset.search_moves
            found, found_value = improve(
                instance, [greedy_order], stop, instance.policy.seed, moves
            )
            self.stats.search_value = found_value
            if found_value < value:
                jobs, value = found, found_value
            if bound < value - 1e-9:
                jobs, value = self._lns(instance, jobs, value, bound, deadline)
        improved = value < self.stats.greedy_value - 1e-9
        if (value - bound) / max(value, 1.0) <= 1e-9:
            status = Status.OPTIMAL
        elif improved:
            status = Status.FEASIBLE
        else:
            status = Status.GREEDY_FALLBACK
        decision = assemble(instance, self.name, jobs, status, bound, started)
        if improved:
            problems = check(instance, decision)
            if problems:  # a model bug must never reach a cluster: the greedy stands
                log.error("cpsat decision rejected by the checker: %s", problems[:3])
                self.stats.fallback = True
                status = Status.GREEDY_FALLBACK
                decision = assemble(instance, self.name, greedy, status, bound, started)
        return decision

    def _lns(
        self,
        instance: Instance,
        jobs: list[JobDecision],
        value: float,
        bound: float,
        deadline: float,
    ) -> tuple[list[JobDecision], float]:
        """CP-SAT large neighbourhood search from ``jobs`` until ``deadline``."""
        preset = self.preset
        rng = random.Random(instance.policy.seed)
        topologies = node_topologies(instance)
        running = instance.running_index
        strategies: tuple[str, ...] = STRATEGIES
        if any(preemptible_now(instance, r) for r in range(len(instance.running))):
            strategies = (*STRATEGIES, "rank")
        size = preset.hood_size
        rounds = 0
        overhead = 0.02  # a round's time outside CP-SAT (model, decode, merge), as seen so far
        while time.perf_counter() < deadline - overhead and bound < value - 1e-9:
            if preset.deterministic and rounds >= preset.lns_rounds:
                break
            round_started = time.perf_counter()
            incumbent = {
                instance.queue_position(item.id): item
                for item in jobs
                if item.action in (Action.START, Action.PLANNED, Action.DEFERRED)
            }
            preempted = frozenset(
                running[item.id] for item in jobs if item.action is Action.PREEMPT
            )
            strategy = strategies[rounds % len(strategies)]
            free = choose_neighbourhood(instance, incumbent, rng, size, strategy)
            hood = make_neighbourhood(
                instance, incumbent, free, topologies, preset.nodes_per_job, preempted
            )
            result = solve_neighbourhood(hood, self.parameters, deadline - overhead, preset, rounds)
            rounds += 1
            self.stats.lns_rounds = rounds
            self.stats.sizes.append(len(hood.jobs))
            self.stats.victims.append(len(hood.victims))
            if result is None:
                size = max(4, size * 3 // 4)
                continue
            if result.proved:
                self.stats.lns_optimal += 1
                size = min(len(instance.queue), size + 4)
            self._audit(hood, result)
            decided_preempted = (preempted - {v.position for v in hood.victims}) | result.preempted
            merged = complete(instance, {**incumbent, **result.decided}, decided_preempted)
            merged_value = objective(instance, merged)
            if merged_value < value - 1e-9 * max(1.0, value):
                jobs, value = merged, merged_value
                self.stats.lns_improvements += 1
            spent = time.perf_counter() - round_started - result.solve_s
            overhead = max(0.02, 0.5 * overhead, spent)
        return jobs, value

    def _audit(self, hood: Neighbourhood, result: HoodResult) -> None:
        """Compare the decoded neighbourhood's cost (the decision's objective) with the
        model's; a decoded cost above it means the model mis-prices something."""
        share = freed_share(hood, result.decided, result.preempted)
        gap = share - result.value
        self.stats.pricing_gap = max(self.stats.pricing_gap, gap)
        if result.proved:
            self.stats.proven_gap = max(self.stats.proven_gap, abs(gap))
        if gap > 1e-6 * max(1.0, abs(result.value)):
            log.warning("cpsat neighbourhood decoded at %g, model said %g", share, result.value)


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
    rest = sum(
        weight * instance.deferred_cost_end(k)
        for k, weight in enumerate(instance.weights)
        if k not in freed
    )
    return objective(instance, items) - rest


def solve_neighbourhood(
    hood: Neighbourhood,
    parameters: dict[str, Any],
    deadline: float,
    preset: Preset,
    round_no: int,
) -> HoodResult | None:
    """Solve the freed jobs (and victims) exactly; None when no solution came in time."""
    if not hood.jobs:
        return None
    model = cp_model.CpModel()
    variables = Variables(model, hood)
    Constraints(model, hood, variables).add_constraints()
    goal = Objective(model, hood, variables)
    goal.add_objective()
    add_hint(model, hood, variables)
    budget = min(deadline - time.perf_counter(), preset.round_limit_s)
    if budget <= 0.01:
        return None
    solver = cp_model.CpSolver()
    for key, value in parameters.items():
        setattr(solver.parameters, key, value)
    solver.parameters.max_time_in_seconds = budget
    solver.parameters.random_seed = hood.instance.policy.seed + round_no
    if preset.deterministic:
        solver.parameters.max_deterministic_time = preset.lns_deterministic_s
    # CP-SAT can overshoot its own limit: a watchdog stops the search.
    watchdog = threading.Timer(budget + 0.01, solver.stop_search)
    watchdog.start()
    try:
        status = solver.solve(model)
    finally:
        watchdog.cancel()
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    decided, preempted = decode(hood, variables, solver)
    proved = status == cp_model.OPTIMAL
    return HoodResult(decided, preempted, proved, goal.value(solver), solver.wall_time)
