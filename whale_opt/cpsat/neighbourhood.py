"""Which jobs a neighbourhood frees, and what stays fixed around them.

Strategies rotate (:data:`STRATEGIES`): the jobs starting first, a window
of planned starts around a random one, the jobs of one GPU type, the
heaviest waiting ones, one of the heaviest delayed jobs with the jobs that
block it (they start before it on nodes of its types, its rack first),
and, when something may be preempted, ``rank``: the waiting jobs of the
highest priority classes with the jobs starting now they compete with.
:func:`make_neighbourhood` fixes every other job on a timeline, decides
which running jobs the freed ones may displace
(:mod:`whale_opt.cpsat.victims`) and lists each freed job's choices
(:mod:`whale_opt.cpsat.candidates`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from whale_opt.cpsat.candidates import FreeJob, Neighbourhood, Victim, free_job
from whale_opt.cpsat.symmetry import Interchangeable, idle, interchangeable, job_shapes
from whale_opt.cpsat.victims import MAX_NEW_VICTIMS, choose_victims
from whale_opt.decision import JobDecision, job_node_positions
from whale_opt.placement.records import Placement, to_placement
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance, class_rank
from whale_opt.rules import waits_for_release
from whale_opt.topology import NodeTopology

STRATEGIES = ("now", "window", "type", "heavy", "blockers")


def choose_neighbourhood(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    rng: random.Random,
    size: int,
    strategy: str,
) -> set[int]:
    """Which queued jobs to free: by ``strategy`` (one of :data:`STRATEGIES`, or
    ``rank``: high priority classes that wait, for preemption to serve)."""
    positions = list(incumbent)
    if len(positions) <= size:
        return set(positions)

    def start(k: int) -> float:
        item = incumbent[k]
        return float("inf") if item.start_s is None else float(item.start_s)

    weights = instance.weights
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
    elif strategy == "blockers":
        ranked = _blockers(instance, incumbent, rng, size, start)
    elif strategy == "rank":
        # Waiting jobs of the highest classes, and the jobs starting now they compete with.
        waiting = sorted(
            positions,
            key=lambda k: (
                -class_rank(instance, instance.queue[k]),
                -weights[k] * min(start(k), 1e12) * rng.random(),
            ),
        )
        now = [k for k in positions if start(k) == 0]
        rng.shuffle(now)
        ranked = list(dict.fromkeys([*waiting[: size // 2 + 1], *now, *waiting]))
    else:
        ranked = sorted(
            positions,
            key=lambda k: -weights[k] * min(start(k), 1e12) * rng.random(),
        )
    return set(ranked[:size])


def _blockers(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    rng: random.Random,
    size: int,
    start: Callable[[int], float],
) -> list[int]:
    """One of the heaviest delayed jobs (weight x start), then the jobs that start
    before it on nodes it could use, those of its incumbent rack first: freeing
    them together lets the model move the blockers aside for it."""
    weights = instance.weights
    delayed = sorted(
        (k for k in incumbent if 0 < start(k) < float("inf")),
        key=lambda k: -weights[k] * start(k),
    )
    if not delayed:
        return sorted(incumbent, key=lambda k: (start(k), rng.random()))
    pivot = rng.choice(delayed[:3])
    types = set(instance.eligible_types[pivot])
    racks = {instance.nodes[n].rack for n in job_node_positions(instance, incumbent[pivot])}
    blockers = []
    for k, item in incumbent.items():
        if k == pivot or not start(k) < start(pivot):
            continue
        nodes = job_node_positions(instance, item)
        if any(instance.nodes[n].gpu_type in types for n in nodes):
            same_rack = any(instance.nodes[n].rack in racks for n in nodes)
            blockers.append((not same_rack, -start(k), rng.random(), k))
    blockers.sort()
    ranked = [pivot, *(k for *_, k in blockers)]
    return list(dict.fromkeys([*ranked, *delayed]))[: max(size, 1)]


def make_neighbourhood(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    free: set[int],
    topologies: tuple[NodeTopology, ...],
    nodes_per_job: int,
    preempted: frozenset[int] = frozenset(),
    *,
    whole: bool = False,
) -> Neighbourhood:
    """Fix every job not in ``free`` on a timeline; list the freed jobs' choices and
    the running jobs they may displace (``preempted``: the incumbent's preemptions,
    running positions).

    ``whole``: the whole round's model (``free`` is every queued job): every
    eligible node, every NVLink-connected GPU set to start on, every running job
    a freed one may preempt; :attr:`Neighbourhood.whole_round` says whether it
    came out complete.
    """
    if whole:
        nodes_per_job = len(instance.nodes)
    victims, fixed, all_victims = choose_victims(
        instance, incumbent, free, preempted, topologies, None if whole else MAX_NEW_VICTIMS
    )
    gone = fixed | {victim.position for victim in victims}
    timeline = ClusterState(
        instance, topologies, preempted=frozenset(instance.running[r].id for r in gone)
    )
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
        if timeline.first_end_at(node) > placement.start:
            needs_release.append((node, placement.start))
    symmetry = None
    if whole:
        placements = {p: to_placement(instance, p, incumbent[p]) for p in free}
        symmetry = _interchangeable(instance, timeline, placements, victims)
        incumbent = symmetry.canonical(instance, incumbent, placements)
    jobs: list[FreeJob] = []
    for position in sorted(free):
        extra = tuple(n for v in victims if position in v.displacers for n in v.gpus)
        placement = to_placement(instance, position, incumbent[position])
        choice = free_job(
            instance,
            timeline,
            position,
            placement,
            nodes_per_job,
            extra_nodes=extra,
            whole=whole,
            offered=None
            if symmetry is None
            else symmetry.offered(position, timeline.eligible(position)),
        )
        if choice is not None:
            jobs.append(choice)
    hood = Neighbourhood(instance, timeline, jobs, incumbent, needs_release, victims, fixed)
    hood.whole_round = (
        whole and all_victims and free == set(incumbent) and all(item.complete for item in jobs)
    )
    return hood


def _interchangeable(
    instance: Instance,
    timeline: ClusterState,
    placements: dict[int, Placement | None],
    victims: list[Victim],
) -> Interchangeable:
    """The interchangeable idle nodes of a whole round (:mod:`whale_opt.cpsat.symmetry`),
    its freed jobs' incumbent ``placements`` by queue position."""
    shapes = job_shapes(instance, timeline.topologies, timeline.eligible, placements)
    busy = {n for victim in victims for n in victim.gpus}
    return interchangeable(instance, shapes, lambda n: n not in busy and idle(timeline, n))
