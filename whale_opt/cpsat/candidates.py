"""What one neighbourhood model chooses among, computed from the topology.

A neighbourhood frees a few queued jobs of the incumbent decision; every
other job keeps its placement and becomes fixed usage on the timeline. For
each freed job this module lists its GPU types with durations, the nodes it
may use (the best few by earliest fit on the fixed timeline, plus its
incumbent nodes and the nodes of running jobs it may displace), how it uses
them (one node, whole nodes of one rack, or GPU counts spread over nodes)
and, on nodes whose NVLink layout is not all to all, the exact GPU sets it
may take if it starts now. The graph never enters the model: only these
lists do.

Soft preferences are priced here, per candidate, by
:func:`whale_opt.preferences.dropped` (the objective's own rule), in seconds
of the job's weight: a node (planned on one node), an exact GPU set (started
now), a GPU type, a node outside the zone, and, for a spread job that
prefers NVLink, the NVLink-shaped alternatives (one node with linked GPUs,
or whole linked nodes of one size in one rack) that do not pay the NVLink
price.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import Enum

from whale_opt import preferences
from whale_opt.decision import JobDecision
from whale_opt.placement.profile import INF
from whale_opt.placement.records import Placement
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import MILLI, Instance
from whale_opt.topology import (
    NodeTopology,
    bits,
    connected_sets,
    needs_nvlink,
    popcount,
    single_node,
)

RELAXED_SETS = 2  # GPU sets that are not NVLink-connected offered to a job preferring NVLink
MAX_SUBSETS = 2_000  # GPU subsets looked at per node when listing those sets
MASKS_PER_NODE = 6  # NVLink-connected GPU sets offered per node to a job starting now
FRESH_GPUS = 2  # free GPUs per node offered to a share starting now (free GPUs are alike)
ALL_SETS = 70  # C(8, 4): every GPU set of one size on a node of 8 (exact rounds)


class Mode(Enum):
    """How a job uses its nodes."""

    SINGLE = "single"  # all GPUs on one node
    GANG = "gang"  # whole nodes of one rack (multi-node nvlink)
    SPREAD = "spread"  # any GPU counts over nodes (rack or any topology)


@dataclass
class Prices:
    """A freed job's soft-preference prices, in seconds (times its weight in the objective).

    ``node[n]``: on node ``n`` alone (SINGLE mode, planned; also a start now
    on a node without exact sets); ``mask[n][i]``: started now on exact set
    ``now_masks[n][i]`` (SINGLE mode); ``gpu_type[t]``: on type ``t`` (GANG
    and SPREAD); ``zone`` for any node in ``outside`` (GANG and SPREAD);
    ``nvlink``: a SPREAD placement that is none of the NVLink shapes.
    """

    node: dict[int, int] = field(default_factory=dict)
    mask: dict[int, list[int]] = field(default_factory=dict)
    gpu_type: dict[str, int] = field(default_factory=dict)
    zone: int = 0
    outside: set[int] = field(default_factory=set)
    nvlink: int = 0


@dataclass
class FreeJob:
    """One freed job: its types, candidate nodes, start-now GPU sets and prices.

    ``shape_nodes`` and ``shape_gangs`` (SPREAD jobs that price NVLink only):
    the nodes where the whole job on one node is NVLink-shaped, and the
    (node size, rack, nodes) groups of whole linked nodes it may take instead.
    For a SPREAD job, ``now_masks`` are the linked sets of a one-node shape.
    """

    position: int
    mode: Mode
    durations: dict[str, int]
    nodes: list[int]
    node_size: int = 0  # GANG: GPUs per node
    now_masks: dict[int, list[int]] = field(default_factory=dict)
    prices: Prices = field(default_factory=Prices)
    shape_nodes: list[int] = field(default_factory=list)
    shape_gangs: list[tuple[int, str, list[int]]] = field(default_factory=list)
    # Every placement the job could take is among these choices (a whole round's
    # model proves its optimum only when every freed job's are).
    complete: bool = True


@dataclass
class Victim:
    """A running job the neighbourhood may preempt (or must keep preempted).

    ``gpus[n]``: mask of its GPUs on node ``n``; ``displacers``: freed queue
    positions that may displace it (:func:`whale_opt.rules.may_displace`);
    ``preempted``: preempted in the incumbent; ``forced``: preempted there
    for freed jobs only while fixed ones use its GPUs, so it stays preempted
    and a freed job must still justify it.
    """

    position: int
    gpus: dict[int, int]
    remaining: int
    displacers: set[int]
    preempted: bool = False
    forced: bool = False


@dataclass
class Neighbourhood:
    """The fixed part (a timeline with every other job on it) and the freed jobs.

    ``victims`` are running jobs whose preemption the model decides (their
    GPUs are free on ``timeline``; keeping one is an optional interval);
    ``preempted`` the incumbent's other preemptions, fixed (justified by
    fixed jobs). Solved once: decoding a solution
    (:func:`whale_opt.cpsat.solution.decode`) commits it to ``timeline``, so
    a second solve would see the first one's jobs as fixed; build it anew.
    """

    instance: Instance
    timeline: ClusterState
    jobs: list[FreeJob]
    incumbent: dict[int, JobDecision]
    # (node, start) of fixed planned NVLink jobs on partially linked nodes that only
    # a freed job (or a kept victim) ending there by that start can justify (the
    # checker's release rule).
    needs_release: list[tuple[int, int]] = field(default_factory=list)
    victims: list[Victim] = field(default_factory=list)
    preempted: frozenset[int] = frozenset()
    # Every queued job freed with all its choices and every running job a freed
    # one could preempt decided: the model is the whole round's.
    whole_round: bool = False


def prices_nvlink(instance: Instance, position: int) -> bool:
    """Whether job ``position`` pays for a placement that is not NVLink-shaped."""
    job = instance.queue[position]
    return (
        job.prefer_nvlink
        and job.topology != "nvlink"
        and job.gpu_count > 1
        and instance.policy.nvlink_penalty_s > 0
    )


def job_mode(
    instance: Instance,
    topologies: tuple[NodeTopology, ...],
    eligible: tuple[int, ...],
    position: int,
    incumbent: Placement | None,
) -> tuple[Mode, tuple[int, ...], bool] | None:
    """How job ``position`` uses its nodes, the ones of ``eligible`` (the nodes that
    could ever hold part of it) it may use so, and whether those are all its
    placements (None: no node could ever host it)."""
    job = instance.queue[position]
    if not eligible:
        return None
    complete = True
    size = {n: topologies[n].size for n in eligible}
    if job.shares or job.cpu_only:
        mode = Mode.SINGLE  # one GPU, or none: one node
    elif job.topology == "nvlink" and job.gpu_count > 1:
        # One node where a node is big enough; else whole nodes of one size.
        if any(single_node(job, topologies[n]) for n in eligible):
            mode = Mode.SINGLE
            # Whole smaller nodes would hold it too (a gang): not modelled.
            complete = not any(
                size[n] < job.gpu_count and job.gpu_count % size[n] == 0 for n in eligible
            )
            eligible = tuple(n for n in eligible if size[n] >= job.gpu_count)
        else:
            mode = Mode.GANG
            sizes = {size[n] for n in eligible if job.gpu_count % size[n] == 0}
            complete = len(sizes) == 1  # one node size is modelled
            if incumbent is not None:
                sizes &= {size[n] for n in incumbent.nodes}
            if not sizes:
                return None
            chosen_size = max(sizes)
            eligible = tuple(n for n in eligible if size[n] == chosen_size)
    elif single_node(job, topologies[eligible[0]]):
        mode = Mode.SINGLE
    else:
        mode = Mode.SPREAD
    return mode, eligible, complete


def free_job(
    instance: Instance,
    timeline: ClusterState,
    position: int,
    incumbent: Placement | None,
    nodes_per_job: int,
    extra_nodes: tuple[int, ...] = (),
    *,
    whole: bool = False,
    offered: set[int] | None = None,
) -> FreeJob | None:
    """The choices of job ``position`` on ``timeline`` (None: no node could ever host it).

    ``extra_nodes`` are offered too when eligible (nodes of running jobs it
    may displace). ``whole``: every choice (every eligible node, or those of
    ``offered``, every GPU set to start on); :attr:`FreeJob.complete` says
    whether that came out so.
    """
    job = instance.queue[position]
    found = job_mode(
        instance, timeline.topologies, timeline.eligible(position), position, incumbent
    )
    if found is None:
        return None
    mode, eligible, complete = found
    masks_per_node = ALL_SETS if whole else MASKS_PER_NODE
    durations = {
        instance.nodes[n].gpu_type: instance.durations[position][instance.nodes[n].gpu_type]
        for n in eligible
    }
    allowed = set(eligible)
    shaped = mode is Mode.SPREAD and prices_nvlink(instance, position)
    if whole:
        kept = allowed if offered is None else allowed & offered
    else:
        kept = _near_nodes(
            instance,
            timeline,
            position,
            incumbent,
            extra_nodes,
            mode,
            shaped,
            eligible,
            nodes_per_job,
        )
    nodes = sorted(kept)
    if not nodes:
        return None
    item = FreeJob(position, mode, durations, nodes, complete=complete)
    if mode is Mode.GANG:
        item.node_size = timeline.topology(nodes[0]).size
    if shaped:
        _nvlink_shapes(instance, timeline, item, masks_per_node)
    if job.shares:
        # A whole round's model offers every free GPU (its proof must cover them all).
        fresh = None if whole else FRESH_GPUS
        for n in nodes:
            item.now_masks[n] = share_gpus(timeline, n, job.gpu_milli, fresh)
    elif mode is Mode.SINGLE and (needs_nvlink(job) or prices_nvlink(instance, position)):
        for n in nodes:
            topo = timeline.topology(n)
            free = timeline.free_mask(n)
            if not topo.clique and popcount(free) >= job.gpu_count:
                item.now_masks[n] = _linked_sets(item, topo, free, job.gpu_count, masks_per_node)
                if not needs_nvlink(job):
                    item.now_masks[n] += _relaxed_sets(topo, free, job.gpu_count, whole)
    if incumbent is not None and incumbent.start == 0:
        # Keep the incumbent's own GPU set on offer, so the hint is complete (a
        # spread job's sets are its linked one-node shapes only).
        for n, mask in zip(incumbent.nodes, incumbent.masks, strict=True):
            if n not in item.now_masks or mask in item.now_masks[n]:
                continue
            shape = popcount(mask) == job.gpu_count and timeline.topology(n).connected(mask)
            if mode is Mode.SINGLE or shape:
                item.now_masks[n].append(mask)
    item.now_masks = {n: masks for n, masks in item.now_masks.items() if masks}
    _price(instance, item)
    return item


def _near_nodes(
    instance: Instance,
    timeline: ClusterState,
    position: int,
    incumbent: Placement | None,
    extra_nodes: tuple[int, ...],
    mode: Mode,
    shaped: bool,
    eligible: tuple[int, ...],
    nodes_per_job: int,
) -> set[int]:
    """A neighbourhood's few nodes for a freed job: its incumbent's, the
    ``extra_nodes`` (of running jobs it may displace), the ``nodes_per_job``
    where it ends first alone and, for multi-node modes, the best placement's
    and whole racks of them (``shaped``: a spread job that prices NVLink)."""
    job = instance.queue[position]
    allowed = set(eligible)
    kept = {n for n in (*(incumbent.nodes if incumbent else ()), *extra_nodes) if n in allowed}
    if mode is Mode.SINGLE or shaped:
        # SPREAD jobs that price NVLink: the best nodes for the whole job on one node.
        one_node = [n for n in eligible if timeline.healthy_count(n) >= job.gpu_count]
        kept.update(_earliest_nodes(instance, timeline, position, one_node, nodes_per_job))
    if mode is not Mode.SINGLE:
        best = timeline.best_placement(position)
        if best is not None:
            kept.update(n for n in best.nodes if n in allowed)
        if mode is Mode.GANG or shaped:
            # Whole nodes of the incumbent's and the best placement's racks.
            racks = {instance.nodes[n].rack for n in kept}
            kept.update(n for n in eligible if instance.nodes[n].rack in racks)
    return kept


def share_gpus(
    timeline: ClusterState, node: int, milli: int, fresh: int | None = FRESH_GPUS
) -> list[int]:
    """One-GPU masks a share of ``milli`` may start on now on ``node``: every shared
    GPU with room, and the first ``fresh`` free ones (None: all)."""
    masks = [
        1 << index
        for index, (used, _) in sorted(timeline.shares_now(node).items())
        if used + milli <= MILLI
    ]
    free = timeline.free_mask(node)
    masks += [1 << index for index in itertools.islice(bits(free), fresh)]
    return masks


def _earliest_nodes(
    instance: Instance,
    timeline: ClusterState,
    position: int,
    nodes: list[int],
    count: int,
) -> list[int]:
    """The ``count`` nodes of ``nodes`` where the whole job ends first (ties: fewest free)."""
    job = instance.queue[position]
    scored = []
    for n in nodes:
        duration = instance.durations[position][instance.nodes[n].gpu_type]
        start = timeline.node_fit(n, 0, duration, job)
        if start < INF:
            scored.append((start + duration, timeline.free_count(n), n))
    scored.sort()
    return [n for _, _, n in scored[:count]]


def _linked_sets(item: FreeJob, topo: NodeTopology, free: int, size: int, limit: int) -> list[int]:
    """The best ``limit`` NVLink-connected free sets of ``size``; ``item`` is no longer
    complete when there were more."""
    found = connected_sets(topo, free, size, limit + 1)
    if len(found) > limit:
        item.complete = False
    return found[:limit]


def _relaxed_sets(topo: NodeTopology, free: int, size: int, every: bool = False) -> list[int]:
    """Up to :data:`RELAXED_SETS` (``every``: all) free GPU sets of ``size`` that are not
    NVLink-connected, those leaving the largest linked block free first."""
    free &= topo.healthy
    found = []
    for combo in itertools.islice(itertools.combinations(tuple(bits(free)), size), MAX_SUBSETS):
        mask = sum(1 << i for i in combo)
        if not topo.connected(mask):
            found.append((-topo.largest_block(free & ~mask), mask))
    found.sort()
    return [mask for _, mask in (found if every else found[:RELAXED_SETS])]


def _nvlink_shapes(instance: Instance, timeline: ClusterState, item: FreeJob, sets: int) -> None:
    """The NVLink shapes of a SPREAD job that prefers NVLink: one node, or whole nodes."""
    k = item.position
    job = instance.queue[k]
    for n in item.nodes:
        if timeline.healthy_count(n) < job.gpu_count:
            continue
        if "nvlink" in preferences.dropped(instance, k, {n: job.gpu_count}):
            continue
        item.shape_nodes.append(n)
        topo = timeline.topology(n)
        if not topo.clique and timeline.free_count(n) >= job.gpu_count:
            item.now_masks[n] = _linked_sets(item, topo, timeline.free_mask(n), job.gpu_count, sets)
    groups: dict[tuple[int, str], list[int]] = {}
    for n in item.nodes:
        s = timeline.topology(n).size
        if job.gpu_count % s == 0 and job.gpu_count // s >= 2:
            groups.setdefault((s, instance.nodes[n].rack), []).append(n)
    for (s, rack), members in sorted(groups.items()):
        need = job.gpu_count // s
        # A node qualifies when it and another member make an NVLink-shaped pair.
        good = [
            n
            for n in members
            if any(
                "nvlink" not in preferences.dropped(instance, k, {n: s, m: s})
                for m in members
                if m != n
            )
        ]
        if len(good) >= need and "nvlink" not in preferences.dropped(
            instance, k, dict.fromkeys(good[:need], s)
        ):
            item.shape_gangs.append((s, rack, good))


def _seconds(instance: Instance, position: int, names: tuple[str, ...]) -> int:
    """The price of dropping ``names``, in seconds of job ``position``'s weight."""
    if not names:
        return 0
    return round(preferences.price(instance, position, names) / instance.weights[position])


def _price(instance: Instance, item: FreeJob) -> None:
    """Every candidate's soft-preference price, by :func:`whale_opt.preferences.dropped`."""
    k = item.position
    job = instance.queue[k]
    prices = item.prices
    if item.mode is Mode.SINGLE:
        for n in item.nodes:
            prices.node[n] = _seconds(
                instance, k, preferences.dropped(instance, k, {n: job.gpu_count})
            )
        for n, masks in item.now_masks.items():
            prices.mask[n] = [
                _seconds(instance, k, preferences.dropped(instance, k, {n: job.gpu_count}, {n: m}))
                for m in masks
            ]
        return
    share = item.node_size or 1
    for n in item.nodes:
        names = preferences.dropped(instance, k, {n: share})
        if "zone" in names:
            prices.outside.add(n)
        if "gpu_type" in names:
            prices.gpu_type[instance.nodes[n].gpu_type] = _seconds(instance, k, ("gpu_type",))
    if prices.outside:
        prices.zone = _seconds(instance, k, ("zone",))
    if item.mode is Mode.SPREAD and prices_nvlink(instance, k):
        prices.nvlink = _seconds(instance, k, ("nvlink",))
