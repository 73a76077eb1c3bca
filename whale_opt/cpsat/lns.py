"""CP-SAT large neighbourhood search: free a few jobs, solve them exactly, keep gains.

Each round frees some jobs (those starting now, a window of planned starts,
one GPU type, ... by turns; :mod:`whale_opt.cpsat.neighbourhood`), fixes
every other job, and solves the freed ones with CP-SAT
(:mod:`whale_opt.cpsat.cpmodel`) from the incumbent as a complete hint. A
neighbourhood proven optimal grows the next one; one that found nothing
shrinks it. Every solution is re-priced by the decision's objective and kept
when it improves. All state lives in one call: the search can run in many
threads at once.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from whale_opt.cpsat.candidates import Neighbourhood
from whale_opt.cpsat.cpmodel import (
    FIRST_SOLUTION_FACTOR,
    HoodResult,
    ModelRejected,
    build_seconds,
    freed_share,
    model_build_seconds,
    outside_cost,
    solve_neighbourhood,
    whole_round_seconds,
)
from whale_opt.cpsat.neighbourhood import STRATEGIES, choose_neighbourhood, make_neighbourhood
from whale_opt.cpsat.presets import Preset
from whale_opt.cpsat.symmetry import whole_pairs
from whale_opt.decision import Action, JobDecision, objective
from whale_opt.patience import Patience
from whale_opt.placement.eligibility import eligible_counts
from whale_opt.placement.serial import complete
from whale_opt.problem_data import Instance
from whale_opt.rules import preemptible_now
from whale_opt.topology import node_topologies

log = logging.getLogger("whale_opt")
MIN_HOOD_SIZE = 4
GROW_BY = 4  # jobs added to the next neighbourhood after one proven optimal
MIN_OVERHEAD_S = 0.02  # a round's time outside CP-SAT (model, decode, merge), at least
# A neighbourhood's timeline holds every queued and running job: on 10,000 GPUs
# with 4,200-4,750 of them a neighbourhood took 0.31-0.48 s outside CP-SAT (65-100
# us a job), where the first was expected to take MIN_OVERHEAD_S and took a 1 s
# round to 1.12 s.
TIMELINE_MICROS_PER_JOB = 100.0


@dataclass
class LnsStats:
    """What one search did: neighbourhoods tried, proven optimal and improving,
    jobs and victims freed in all, and the pricing audit.

    ``pricing_gap``: the largest excess of a decoded neighbourhood's cost
    (re-priced by :func:`whale_opt.decision.objective`) over what the model
    optimised (<= 0 up to rounding when the model prices exactly; below 0
    when the decoder did better than the model assumed; -inf when no
    neighbourhood was solved). ``proven_gap``: the largest absolute
    difference on neighbourhoods CP-SAT proved optimal.
    """

    rounds: int = 0
    improvements: int = 0
    optimal: int = 0
    freed_jobs: int = 0
    freed_victims: int = 0
    pricing_gap: float = -math.inf
    proven_gap: float = 0.0
    exact_tried: int = 0
    exact_skipped: int = 0  # its model would not have been built in time
    exact_proven: int = 0
    exact_s: float = 0.0
    exact_bound: float = 0.0  # CP-SAT's bound on a whole round's model (0: none)
    rejected: int = 0  # models CP-SAT refused as invalid (the first is logged)
    improved_by: dict[str, int] = field(default_factory=dict)  # strategy -> improvements

    def reject(self, instance: Instance, exc: ModelRejected) -> None:
        """Count a model CP-SAT refused; warn the first time in the round: the
        searches without CP-SAT still run, and the decision stays valid."""
        self.rejected += 1
        if self.rejected == 1:
            reason = str(exc).strip().partition(" vars:")[0] or "invalid model"  # not the list
            log.warning(
                "cpsat: CP-SAT refused the model of %s (%s); the heuristics' decision stands",
                instance.name,
                reason if len(reason) <= 160 else reason[:159] + "…",
            )

    def audit(self, hood: Neighbourhood, result: HoodResult) -> bool:
        """Compare the decoded neighbourhood's cost (the decision's objective) with the
        model's; a decoded cost above it means the model mis-prices something.
        Returns whether the decoded cost is the model's (up to rounding)."""
        share = freed_share(hood, result.decided, result.preempted)
        gap = share - result.value
        self.pricing_gap = max(self.pricing_gap, gap)
        if result.proved:
            self.proven_gap = max(self.proven_gap, abs(gap))
        if gap > 1e-6 * max(1.0, abs(result.value)):
            log.warning("cpsat neighbourhood decoded at %g, model said %g", share, result.value)
            return False
        return True

    def as_dict(self) -> dict[str, float | int]:
        """The figures as ``lns_*`` numbers (``pricing_gap`` only once finite)."""
        out: dict[str, float | int] = {
            "lns_rounds": self.rounds,
            "lns_improvements": self.improvements,
            "lns_optimal": self.optimal,
            "lns_freed_jobs": self.freed_jobs,
            "lns_freed_victims": self.freed_victims,
            "proven_gap": self.proven_gap,
            "exact_tried": self.exact_tried,
            "exact_skipped": self.exact_skipped,
            "exact_proven": self.exact_proven,
            "exact_s": self.exact_s,
            "exact_bound": self.exact_bound,
        }
        if self.rejected:
            out["cpsat_rejected"] = self.rejected
        out.update({f"lns_improved_{name}": count for name, count in self.improved_by.items()})
        if math.isfinite(self.pricing_gap):
            out["pricing_gap"] = self.pricing_gap
        return out


def _incumbent(
    instance: Instance, jobs: list[JobDecision]
) -> tuple[dict[int, JobDecision], frozenset[int]]:
    """The queued jobs' decisions by queue position, and the running positions preempted."""
    incumbent = {
        instance.queue_position(item.id): item
        for item in jobs
        if item.action in (Action.START, Action.PLANNED, Action.DEFERRED)
    }
    running = instance.running_index
    preempted = frozenset(running[item.id] for item in jobs if item.action is Action.PREEMPT)
    return incumbent, preempted


def whole_neighbourhood(
    instance: Instance, jobs: list[JobDecision]
) -> tuple[Neighbourhood, dict[int, JobDecision], frozenset[int]]:
    """The whole round's neighbourhood from the complete decision ``jobs``: every
    queued job freed with all its choices, every running job a queued one may
    preempt decided; with the incumbent by queue position and the running
    positions it preempts (:func:`_incumbent`)."""
    incumbent, preempted = _incumbent(instance, jobs)
    hood = make_neighbourhood(
        instance, incumbent, set(incumbent), node_topologies(instance), 0, preempted, whole=True
    )
    return hood, incumbent, preempted


def _merge(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    preempted: frozenset[int],
    hood: Neighbourhood,
    result: HoodResult,
) -> tuple[list[JobDecision], float]:
    """The complete decision with the neighbourhood's solution in it, and its objective."""
    kept = (preempted - {v.position for v in hood.victims}) | result.preempted
    merged = complete(instance, {**incumbent, **result.decided}, kept)
    return merged, objective(instance, merged)


def exact_round(
    instance: Instance,
    jobs: list[JobDecision],
    value: float,
    deadline: float,
    preset: Preset,
    parameters: dict[str, Any],
    seed: int,
    stats: LnsStats,
    patience: Patience | None = None,
) -> tuple[list[JobDecision], float, bool]:
    """Solve the whole round as one model until ``deadline`` (a :func:`time.perf_counter`
    instant) or the round's ``patience`` runs out, from the complete decision
    ``jobs`` (of objective ``value``) as hint.

    The model frees every queued job with all its choices (every eligible
    node, every NVLink-connected GPU set to start on now) and decides every
    running job a queued one may preempt. CP-SAT returns the moment it
    proves the model optimal. Returns the better of the two decisions, its
    objective, and whether the round is proven: CP-SAT proved the model
    optimal, the model is the whole round's, and the decoded decision costs
    what the model says.
    """
    stats.exact_tried = 1
    # Jobs no node can host stay out of the model; each other job has one choice at least.
    hosted = pairs = sum(1 for count in eligible_counts(instance) if count)
    if whole_round_seconds(hosted, pairs) <= deadline - time.perf_counter():
        hosted, pairs = whole_pairs(instance)
    if whole_round_seconds(hosted, pairs) > deadline - time.perf_counter():
        stats.exact_skipped = 1  # not even worth listing its choices
        return jobs, value, False
    hood, incumbent, preempted = whole_neighbourhood(instance, jobs)
    if FIRST_SOLUTION_FACTOR * build_seconds(hood) > deadline - time.perf_counter():
        # Built and presolved, it would leave no time to search (or overrun the round).
        stats.exact_skipped = 1
        return jobs, value, False
    try:
        result = solve_neighbourhood(
            hood, parameters, deadline, preset, 0, seed, whole=True, patience=patience
        )
    except ModelRejected as exc:
        stats.reject(instance, exc)
        return jobs, value, False
    if result is None:
        return jobs, value, False
    stats.exact_s = result.solve_s
    priced = stats.audit(hood, result)
    merged, merged_value = _merge(instance, incumbent, preempted, hood, result)
    proven = result.proved and hood.whole_round and priced
    if hood.whole_round and priced:
        # Jobs no node could ever host are out of the model: deferred in every decision.
        stats.exact_bound = result.bound + outside_cost(hood)
    stats.exact_proven = int(proven)
    if merged_value < value - 1e-9 * max(1.0, value) or (proven and merged_value <= value):
        return merged, merged_value, proven
    return jobs, value, proven and merged_value <= value + 1e-6 * max(1.0, value)


def first_overhead(instance: Instance, preset: Preset) -> float:
    """What a neighbourhood of ``instance`` is expected to take outside CP-SAT: its
    timeline (every queued and running job on the cluster, at
    :data:`TIMELINE_MICROS_PER_JOB`) and its model's build
    (:func:`whale_opt.cpsat.cpmodel.model_build_seconds`: the preset's
    ``hood_size`` jobs, at most the queue, on ``nodes_per_job`` nodes each)."""
    timeline = TIMELINE_MICROS_PER_JOB * (len(instance.queue) + len(instance.running)) * 1e-6
    hood = min(preset.hood_size, len(instance.queue))
    return max(MIN_OVERHEAD_S, timeline + model_build_seconds(hood, hood * preset.nodes_per_job))


def large_neighbourhood_search(
    instance: Instance,
    jobs: list[JobDecision],
    value: float,
    bound: float,
    deadline: float,
    preset: Preset,
    parameters: dict[str, Any],
    seed: int = 0,
    stats: LnsStats | None = None,
    patience: Patience | None = None,
) -> tuple[list[JobDecision], float]:
    """Improve the complete decision ``jobs`` (of objective ``value``) until ``deadline`` (a
    :func:`time.perf_counter` instant), the round's ``patience`` runs out, the
    ``bound`` is met or, with a deterministic preset, its ``lns_rounds`` are
    done.

    A neighbourhood starts only while the time it takes outside CP-SAT (its
    timeline and choices, the model, decoding, merging) is left before the
    deadline: as the last one took, and before the first as
    :func:`first_overhead` expects.

    Returns the best jobs found and their objective; what the search did goes
    into ``stats``.
    """
    stats = LnsStats() if stats is None else stats
    patience = Patience() if patience is None else patience
    rng = random.Random(seed)
    topologies = node_topologies(instance)
    strategies: tuple[str, ...] = STRATEGIES
    if any(preemptible_now(instance, r) for r in range(len(instance.running))):
        strategies = (*STRATEGIES, "rank")
    size = preset.hood_size
    overhead = first_overhead(instance, preset)  # as seen so far: kept free before the deadline
    while not patience.over(deadline - overhead) and bound < value - 1e-9:
        if preset.deterministic and stats.rounds >= preset.lns_rounds:
            break
        round_started = time.perf_counter()
        incumbent, preempted = _incumbent(instance, jobs)
        strategy = strategies[stats.rounds % len(strategies)]
        free = choose_neighbourhood(instance, incumbent, rng, size, strategy)
        hood = make_neighbourhood(
            instance, incumbent, free, topologies, preset.nodes_per_job, preempted
        )
        try:
            result = solve_neighbourhood(
                hood, parameters, deadline - overhead, preset, stats.rounds, seed, patience=patience
            )
        except ModelRejected as exc:
            stats.reject(instance, exc)
            result = None
        stats.rounds += 1
        stats.freed_jobs += len(hood.jobs)
        stats.freed_victims += len(hood.victims)
        if result is None:
            size = max(MIN_HOOD_SIZE, size * 3 // 4)
            continue
        if result.proved:
            stats.optimal += 1
            size = min(len(instance.queue), size + GROW_BY)
        stats.audit(hood, result)
        merged, merged_value = _merge(instance, incumbent, preempted, hood, result)
        if merged_value < value - 1e-9 * max(1.0, value):
            jobs, value = merged, merged_value
            patience.progress(value)
            stats.improvements += 1
            stats.improved_by[strategy] = stats.improved_by.get(strategy, 0) + 1
        spent = time.perf_counter() - round_started - result.solve_s
        overhead = max(MIN_OVERHEAD_S, 0.5 * overhead, spent)
    return jobs, value
