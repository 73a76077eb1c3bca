"""The CP-SAT round solver: greedy first, then exact large neighbourhood search.

``CpSatPolicy.decide``:

1. The WSPT greedy gives a complete decision (the hint and the fallback).
2. A local search over list-scheduling orders improves it cheaply.
3. CP-SAT large neighbourhood search: repeatedly free a few jobs (those
   starting now, a window of planned starts, one GPU type, ...), fix every
   other job, and solve the freed jobs *exactly* (per-node GPU / CPU /
   memory cumulatives over time, exact NVLink sets for what starts now,
   gangs, racks, quotas, zones) with the incumbent as a complete hint. Every
   solution decodes into a valid decision; improvements are kept.

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
from whale_opt.cpsat.candidates import FreeJob, Mode, Neighbourhood, free_job
from whale_opt.cpsat.constraints import Constraints
from whale_opt.cpsat.objective import Objective
from whale_opt.cpsat.variables import JobVars, Variables
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.policies.base import (
    assemble,
    complete,
    deferral_reason,
    list_schedule,
    to_job_decision,
    to_placement,
)
from whale_opt.policies.search import improve
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.rules import waits_for_release
from whale_opt.timeline import ClusterTimeline, Placement
from whale_opt.topology import NodeTopology, choose_gpus, node_topologies

log = logging.getLogger("whale_opt")

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
    """What the last round did (for benchmarks and logs)."""

    greedy_value: float = 0.0
    greedy_s: float = 0.0
    search_value: float | None = None
    lns_rounds: int = 0
    lns_improvements: int = 0
    lns_optimal: int = 0
    sizes: list[int] = field(default_factory=list)


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
        deadline = started + limit - min(0.05, 0.03 * limit)  # room to assemble
        greedy_order = wspt_order(instance)
        jobs = list_schedule(instance, greedy_order)
        value = objective(instance, jobs)
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
        return assemble(instance, self.name, jobs, status, bound, started)

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
        size = preset.hood_size
        rounds = 0
        while time.perf_counter() < deadline - 0.02 and bound < value - 1e-9:
            if preset.deterministic and rounds >= preset.lns_rounds:
                break
            incumbent = {
                instance.queue_position(item.id): item
                for item in jobs
                if item.action in (Action.START, Action.PLANNED, Action.DEFERRED)
            }
            free = choose_neighbourhood(instance, incumbent, rng, size, rounds)
            hood = make_neighbourhood(instance, incumbent, free, topologies, preset.nodes_per_job)
            result = solve_neighbourhood(hood, self.parameters, deadline, preset, rounds)
            rounds += 1
            self.stats.lns_rounds = rounds
            self.stats.sizes.append(len(hood.jobs))
            if result is None:
                size = max(4, size * 3 // 4)
                continue
            decided, proved = result
            if proved:
                self.stats.lns_optimal += 1
                size = min(len(instance.queue), size + 4)
            merged = complete(instance, {**incumbent, **decided})
            merged_value = objective(instance, merged)
            if merged_value < value - 1e-9:
                jobs, value = merged, merged_value
                self.stats.lns_improvements += 1
        return jobs, value


STRATEGIES = ("now", "window", "type", "heavy")


def choose_neighbourhood(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    rng: random.Random,
    size: int,
    round_no: int,
) -> set[int]:
    """Which queued jobs to free this round, by a strategy that rotates."""
    strategy = STRATEGIES[round_no % len(STRATEGIES)]
    positions = list(incumbent)
    if len(positions) <= size:
        return set(positions)

    def start(k: int) -> float:
        item = incumbent[k]
        return float("inf") if item.start_s is None else float(item.start_s)

    if strategy == "now":
        ranked = sorted(positions, key=lambda k: (start(k), rng.random()))
    elif strategy == "window":
        pivot = start(rng.choice(positions))
        ranked = sorted(positions, key=lambda k: (abs(start(k) - pivot), rng.random()))
    elif strategy == "type":
        gpu_type = rng.choice(sorted(instance.gpu_types))
        pivot = start(rng.choice(positions))
        ranked = sorted(
            positions,
            key=lambda k: (
                gpu_type not in instance.eligible_types[k],
                abs(start(k) - pivot),
                rng.random(),
            ),
        )
    else:
        ranked = sorted(
            positions,
            key=lambda k: -instance.queue[k].weight * min(start(k), 1e12) * rng.random(),
        )
    return set(ranked[:size])


def make_neighbourhood(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    free: set[int],
    topologies: tuple[NodeTopology, ...],
    nodes_per_job: int,
) -> Neighbourhood:
    """Fix every job not in ``free`` on a timeline; list the freed jobs' choices."""
    timeline = ClusterTimeline(instance, topologies)
    for position, item in incumbent.items():
        if position in free:
            continue
        placement = to_placement(instance, position, item)
        if placement is not None:
            timeline.commit(position, placement)
    needs_release = []
    for position, item in incumbent.items():
        placement = to_placement(instance, position, item)
        if (
            position in free
            or placement is None
            or not waits_for_release(instance, instance.queue[position], placement.nodes)
            or placement.start == 0
        ):
            continue
        node = placement.nodes[0]
        if timeline.first_end[node] > placement.start:
            needs_release.append((node, placement.start))
    jobs: list[FreeJob] = []
    for position in sorted(free):
        choice = free_job(
            instance,
            timeline,
            position,
            to_placement(instance, position, incumbent[position]),
            nodes_per_job,
        )
        if choice is not None:
            jobs.append(choice)
    return Neighbourhood(instance, timeline, jobs, incumbent, needs_release)


def solve_neighbourhood(
    hood: Neighbourhood,
    parameters: dict[str, Any],
    deadline: float,
    preset: Preset,
    round_no: int,
) -> tuple[dict[int, JobDecision], bool] | None:
    """Solve the freed jobs exactly; their new decisions and whether proven optimal."""
    if not hood.jobs:
        return None
    model = cp_model.CpModel()
    variables = Variables(model, hood)
    Constraints(model, hood, variables).add_constraints()
    Objective(model, hood, variables).add_objective()
    _hint(model, hood, variables)
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
    return _decode(hood, variables, solver), status == cp_model.OPTIMAL


def _hint(model: cp_model.CpModel, hood: Neighbourhood, variables: Variables) -> None:
    """The incumbent placement of every freed job, as a complete hint."""
    instance = hood.instance
    for item, v in zip(hood.jobs, variables.jobs, strict=True):
        decided = hood.incumbent[item.position]
        placement = to_placement(instance, item.position, decided)
        model.add_hint(v.deferred, placement is None)
        model.add_hint(v.now, placement is not None and placement.start == 0)
        model.add_hint(v.start, 0 if placement is None else placement.start)
        gpu_type = None if placement is None else placement.gpu_type
        for name, lit in v.on_type.items():
            model.add_hint(lit, name == gpu_type)
        used = (
            {} if placement is None else dict(zip(placement.nodes, placement.counts, strict=True))
        )
        for n, lit in v.on_node.items():
            model.add_hint(lit, n in used)
            if n in v.count:
                model.add_hint(v.count[n], used.get(n, 0))
        racks = {instance.nodes[n].rack for n in used}
        for rack, lit in v.in_rack.items():
            model.add_hint(lit, rack in racks)
        masks = (
            {} if placement is None else dict(zip(placement.nodes, placement.masks, strict=False))
        )
        for n, lits in v.mask.items():
            for mask, lit in zip(item.now_masks[n], lits, strict=True):
                model.add_hint(lit, masks.get(n) == mask)
        if v.outside is not None:
            zone = instance.queue[item.position].zone
            model.add_hint(v.outside, any(instance.nodes[n].zone != zone for n in used))


def _decode(
    hood: Neighbourhood, variables: Variables, solver: cp_model.CpSolver
) -> dict[int, JobDecision]:
    """The freed jobs' decisions: exact GPU sets for starts, nodes for plans."""
    instance = hood.instance
    timeline = hood.timeline
    chosen: list[tuple[FreeJob, JobVars, Placement]] = []
    decided: dict[int, JobDecision] = {}
    for item, v in zip(hood.jobs, variables.jobs, strict=True):
        if solver.boolean_value(v.deferred):
            continue
        gpu_type = next(p for p, lit in v.on_type.items() if solver.boolean_value(lit))
        nodes = tuple(n for n, lit in v.on_node.items() if solver.boolean_value(lit))
        if item.mode is Mode.SPREAD:
            counts = tuple(solver.value(v.count[n]) for n in nodes)
        elif item.mode is Mode.GANG:
            counts = (item.node_size,) * len(nodes)
        else:
            counts = (instance.queue[item.position].gpus,)
        start = solver.value(v.start)
        duration = item.durations[gpu_type]
        chosen.append((item, v, Placement(start, start + duration, gpu_type, nodes, counts)))
    # Exact sets the model fixed go first; count-only starts take what is left.
    chosen.sort(key=lambda entry: (not entry[1].mask, -sum(entry[2].counts)))
    for item, v, placement in chosen:
        if placement.start == 0:
            masks = []
            for n, count in zip(placement.nodes, placement.counts, strict=True):
                fixed = [
                    mask
                    for mask, lit in zip(item.now_masks.get(n, []), v.mask.get(n, []), strict=True)
                    if solver.boolean_value(lit)
                ]
                if fixed:
                    masks.append(fixed[0])
                    continue
                nvlink = (
                    item.mode is Mode.SINGLE
                    and count > 1
                    and (instance.queue[item.position].topology == "nvlink")
                )
                mask = choose_gpus(timeline.topologies[n], timeline.free_now[n], count, nvlink)
                if mask is None:
                    raise RuntimeError(f"model start of job {item.position} has no free GPUs")
                masks.append(mask)
            placement = Placement(
                0,
                placement.end,
                placement.gpu_type,
                placement.nodes,
                placement.counts,
                tuple(masks),
            )
        timeline.commit(item.position, placement)
        decided[item.position] = to_job_decision(instance, item.position, placement)
    for item in hood.jobs:
        if item.position not in decided:
            decided[item.position] = JobDecision(
                instance.queue[item.position].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, item.position, timeline),
            )
    return decided
