"""From a CP-SAT solution to a decision: exact starts, list-scheduled future.

The model is exact about what starts now, so those jobs keep their nodes
(and GPU sets where the model fixed them). The future is pooled in the
model, so the other jobs are list-scheduled on concrete nodes in an order
the model suggests. A few orders are tried and the cheapest decision wins:
decoding is cheap next to solving.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import RoundData
from whale_opt.cpsat.variables import Variables
from whale_opt.decision import Action, JobDecision, objective
from whale_opt.policies.base import deferral_reason, to_job_decision
from whale_opt.timeline import ClusterTimeline, Placement
from whale_opt.topology import choose_gpus, needs_nvlink


@dataclass(frozen=True)
class NowChoice:
    """A job the model starts now: type, nodes, GPUs per node, exact masks if fixed."""

    position: int
    gpu_type: str
    nodes: tuple[int, ...]
    counts: tuple[int, ...]
    masks: tuple[int, ...] = ()


@dataclass
class ModelSolution:
    """The parts of a CP-SAT solution the decoder needs."""

    now: list[NowChoice] = field(default_factory=list)
    later: dict[int, tuple[int, int, str]] = field(default_factory=dict)  # start, end, type
    deferred: list[int] = field(default_factory=list)


def extract(data: RoundData, variables: Variables, solver: cp_model.CpSolver) -> ModelSolution:
    """Read the decoder's inputs off ``solver``'s best solution."""
    solution = ModelSolution()
    for item, v in zip(data.jobs, variables.jobs, strict=True):
        position = item.position
        if solver.boolean_value(v.deferred):
            solution.deferred.append(position)
            continue
        gpu_type = next(p for p, lit in v.present.items() if solver.boolean_value(lit))
        if not solver.boolean_value(v.now):
            start = solver.value(v.start)
            solution.later[position] = (start, start + item.durations[gpu_type], gpu_type)
            continue
        for option, lit in zip(item.options, v.options, strict=True):
            if solver.boolean_value(lit):
                solution.now.append(
                    NowChoice(position, gpu_type, option.nodes, option.counts, option.masks)
                )
        for (_, _, size), rack, rack_nodes in zip(
            item.gangs, v.gang_racks, v.gang_nodes, strict=True
        ):
            if solver.boolean_value(rack):
                chosen = tuple(n for n, lit in rack_nodes.items() if solver.boolean_value(lit))
                solution.now.append(NowChoice(position, gpu_type, chosen, (size,) * len(chosen)))
        for group, counts in zip(v.spread_groups, v.spread_counts, strict=True):
            if solver.boolean_value(group):
                pairs = [(n, solver.value(c)) for n, c in counts.items() if solver.value(c) > 0]
                solution.now.append(
                    NowChoice(
                        position,
                        gpu_type,
                        tuple(n for n, _ in pairs),
                        tuple(c for _, c in pairs),
                    )
                )
    return solution


def _start_now(data: RoundData, timeline: ClusterTimeline, choice: NowChoice) -> Placement | None:
    """Realise a start-now choice on the timeline's free GPUs (None if it cannot)."""
    instance = data.instance
    job = instance.queue[choice.position]
    masks = list(choice.masks)
    if not masks:
        nvlink = needs_nvlink(job) and len(choice.nodes) == 1
        for node, count in zip(choice.nodes, choice.counts, strict=True):
            mask = choose_gpus(timeline.topologies[node], timeline.free_now[node], count, nvlink)
            if mask is None:
                return None
            masks.append(mask)
    duration = instance.durations[choice.position][choice.gpu_type]
    return Placement(0, duration, choice.gpu_type, choice.nodes, choice.counts, tuple(masks))


def decode(
    data: RoundData,
    solution: ModelSolution,
    key: Callable[[int], tuple[float, ...]],
    keep_type: bool = False,
) -> list[JobDecision]:
    """Starts as the model says; the rest list-scheduled by ``key`` (model type if asked)."""
    instance = data.instance
    timeline = ClusterTimeline(instance)
    decided: dict[int, JobDecision] = {}
    # Exact GPU sets first, then count-only choices take what is left, largest first.
    pending = sorted(solution.now, key=lambda c: (not c.masks, -sum(c.counts)))
    leftovers = []
    for choice in pending:
        placement = _start_now(data, timeline, choice)
        if placement is None:
            leftovers.append(choice.position)
            continue
        timeline.commit(choice.position, placement)
        decided[choice.position] = to_job_decision(instance, choice.position, placement)
    order = sorted([*solution.later, *leftovers], key=key) + solution.deferred
    for position in order:
        gpu_type = None
        if keep_type and position in solution.later:
            gpu_type = solution.later[position][2]
        placement = timeline.best_placement(position, gpu_type=gpu_type)
        if placement is None and gpu_type is not None:
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


def best_decode(data: RoundData, solution: ModelSolution) -> list[JobDecision]:
    """The cheapest of a few decodings: by model start, by model end, model types kept."""
    later = solution.later

    def by_start(position: int) -> tuple[float, ...]:
        start, end, _ = later.get(position, (0, 0, ""))
        return (start, end, position)

    def by_end(position: int) -> tuple[float, ...]:
        start, end, _ = later.get(position, (0, 0, ""))
        return (end, start, position)

    candidates = [
        decode(data, solution, by_start),
        decode(data, solution, by_end),
        decode(data, solution, by_start, keep_type=True),
    ]
    return min(candidates, key=lambda jobs: objective(data.instance, jobs))
