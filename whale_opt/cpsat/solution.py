"""From the incumbent to a hint, and from a CP-SAT solution back to decisions.

The hint is the incumbent placement of every freed job and the incumbent's
choice for every victim, so the model starts from a complete solution. The
decoder turns a solution into job decisions: exact GPU sets for starts
(those the model fixed first; then counts, served first from the GPUs of
the victims each job must justify), nodes and counts for plans, and the
victims it preempts.
"""

from __future__ import annotations

from collections import defaultdict

from ortools.sat.python import cp_model

from whale_opt import preferences
from whale_opt.cpsat.candidates import FreeJob, Mode, Neighbourhood, prices_nvlink
from whale_opt.cpsat.variables import JobVars, Variables
from whale_opt.decision import Action, JobDecision
from whale_opt.placement.reasons import deferral_reason
from whale_opt.placement.records import Placement, to_job_decision, to_placement
from whale_opt.topology import choose_gpus, needs_nvlink, popcount


def add_hint(model: cp_model.CpModel, hood: Neighbourhood, variables: Variables) -> None:
    """The incumbent placement of every freed job and its victims, as a complete hint."""
    instance = hood.instance
    starts: dict[int, dict[int, int]] = {}  # freed position -> node -> GPU mask now
    for item, v in zip(hood.jobs, variables.jobs, strict=True):
        placement = to_placement(instance, item.position, hood.incumbent[item.position])
        _hint_job(model, hood, item, v, placement)
        if placement is not None and placement.start == 0:
            starts[item.position] = dict(zip(placement.nodes, placement.masks, strict=True))
    pairs = list(zip(hood.jobs, variables.jobs, strict=True))
    justifiers: set[tuple[int, str, int, int]] = set()  # (position, kind, victim, node)
    for index, (victim, w) in enumerate(zip(hood.victims, variables.victims, strict=True)):
        model.add_hint(w.kept, not victim.preempted)
        if victim.preempted:
            found = _justifier(index, victim.gpus, pairs, starts)
            if found is not None:
                justifiers.add(found)
    for item, v in pairs:
        for (index, n), lit in v.by_mask.items():
            model.add_hint(lit, (item.position, "mask", index, n) in justifiers)
        for (index, n), lit in v.by_count.items():
            model.add_hint(lit, (item.position, "count", index, n) in justifiers)


def _justifier(
    index: int,
    gpus: dict[int, int],
    pairs: list[tuple[FreeJob, JobVars]],
    starts: dict[int, dict[int, int]],
) -> tuple[int, str, int, int] | None:
    """A freed job the incumbent starts on victim ``index``'s GPUs, as the hint's
    justification (position, how, victim, node)."""
    for item, v in pairs:
        for n, mask in gpus.items():
            if not starts.get(item.position, {}).get(n, 0) & mask:
                continue
            listed = _mask_hinted(item, v, n, starts)
            if listed and (index, n) in v.by_mask:
                return (item.position, "mask", index, n)
            if not listed and (index, n) in v.by_count:
                return (item.position, "count", index, n)
    return None


def _mask_hinted(item: FreeJob, v: JobVars, n: int, starts: dict[int, dict[int, int]]) -> bool:
    """Whether the hint starts the job on node ``n`` through one of its listed sets."""
    return n in v.mask and starts.get(item.position, {}).get(n) in item.now_masks[n]


def _hint_job(
    model: cp_model.CpModel,
    hood: Neighbourhood,
    item: FreeJob,
    v: JobVars,
    placement: Placement | None,
) -> None:
    """One freed job's incumbent placement as hints."""
    instance = hood.instance
    model.add_hint(v.deferred, placement is None)
    model.add_hint(v.now, placement is not None and placement.start == 0)
    model.add_hint(v.start, 0 if placement is None else placement.start)
    gpu_type = None if placement is None else placement.gpu_type
    for name, lit in v.on_type.items():
        model.add_hint(lit, name == gpu_type)
    used = {} if placement is None else dict(zip(placement.nodes, placement.counts, strict=True))
    for n, lit in v.on_node.items():
        model.add_hint(lit, n in used)
        if n in v.count:
            model.add_hint(v.count[n], used.get(n, 0))
    racks = {instance.nodes[n].rack for n in used}
    for rack, lit in v.in_rack.items():
        model.add_hint(lit, rack in racks)
    masks = {} if placement is None else dict(zip(placement.nodes, placement.masks, strict=False))
    for n, lits in v.mask.items():
        for mask, lit in zip(item.now_masks[n], lits, strict=True):
            model.add_hint(lit, masks.get(n) == mask)
    if v.outside is not None:
        model.add_hint(v.outside, any(n in item.prices.outside for n in used))
    if v.shaped is not None:
        shaped = bool(used) and "nvlink" not in preferences.dropped(
            instance, item.position, used, masks if masks else None
        )
        node_shape = {n: shaped and len(used) == 1 and n in used for n in v.shape_node}
        for n, lit in v.shape_node.items():
            model.add_hint(lit, node_shape[n])
        gang_shape = {}
        for size, rack, members in item.shape_gangs:
            fits = len(used) > 1 and all(n in members for n in used)
            gang_shape[(size, rack)] = shaped and fits and not any(node_shape.values())
            model.add_hint(v.shape_gang[(size, rack)], gang_shape[(size, rack)])
        model.add_hint(v.shaped, any(node_shape.values()) or any(gang_shape.values()))


def decode(
    hood: Neighbourhood, variables: Variables, solver: cp_model.CpSolver
) -> tuple[dict[int, JobDecision], frozenset[int]]:
    """The freed jobs' decisions and the victims the solution preempts, committed
    to ``hood.timeline`` (kept victims and placed jobs), which is then spent."""
    instance = hood.instance
    timeline = hood.timeline
    preempted = set()
    for victim, w in zip(hood.victims, variables.victims, strict=True):
        if solver.boolean_value(w.kept):
            for n, mask in victim.gpus.items():
                timeline.take_now(n, mask)
        else:
            preempted.add(victim.position)
    chosen: list[tuple[FreeJob, JobVars, Placement, dict[int, int]]] = []
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
            counts = (instance.queue[item.position].gpu_count,)
        start = solver.value(v.start)
        fixed = {
            n: mask
            for n in nodes
            for mask, lit in zip(item.now_masks.get(n, []), v.mask.get(n, []), strict=True)
            if start == 0 and solver.boolean_value(lit)
        }
        placement = Placement(start, start + item.durations[gpu_type], gpu_type, nodes, counts)
        chosen.append((item, v, placement, fixed))
    reserved = _reserve(hood, solver, chosen, preempted)
    # Exact sets the model fixed go first; count-only starts take what is left.
    chosen.sort(key=lambda entry: (not entry[3], -sum(entry[2].counts)))
    decided: dict[int, JobDecision] = {}
    for item, _, placement, fixed in chosen:
        if placement.start == 0:
            masks = tuple(
                fixed[n] if n in fixed else _count_gpus(hood, item, n, count, reserved)
                for n, count in zip(placement.nodes, placement.counts, strict=True)
            )
            placement = Placement(
                0, placement.end, placement.gpu_type, placement.nodes, placement.counts, masks
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
    return decided, frozenset(preempted)


def _reserve(
    hood: Neighbourhood,
    solver: cp_model.CpSolver,
    chosen: list[tuple[FreeJob, JobVars, Placement, dict[int, int]]],
    preempted: set[int],
) -> dict[int, dict[int, int]]:
    """Node -> freed position -> one GPU of each preempted victim the job justifies by
    a count (the model leaves one free for each)."""
    taken: dict[int, int] = defaultdict(int)
    for _, _, _, fixed in chosen:
        for n, mask in fixed.items():
            taken[n] |= mask
    reserved: dict[int, dict[int, int]] = defaultdict(dict)
    for item, v, placement, _ in chosen:
        if placement.start != 0:
            continue
        for (index, n), lit in v.by_count.items():
            if not solver.boolean_value(lit) or hood.victims[index].position not in preempted:
                continue
            spare = hood.victims[index].gpus[n] & hood.timeline.free_mask(n) & ~taken[n]
            if not spare:
                raise RuntimeError(f"no GPU of victim {index} left for job {item.position}")
            bit = spare & -spare
            taken[n] |= bit
            reserved[n][item.position] = reserved[n].get(item.position, 0) | bit
    return reserved


def _count_gpus(
    hood: Neighbourhood, item: FreeJob, n: int, count: int, reserved: dict[int, dict[int, int]]
) -> int:
    """``count`` free GPUs of node ``n`` for a count-only start: its reserved ones first."""
    instance = hood.instance
    topo = hood.timeline.topology(n)
    mine = reserved.get(n, {}).get(item.position, 0)
    others = 0
    for position, mask in reserved.get(n, {}).items():
        if position != item.position:
            others |= mask
    free = hood.timeline.free_mask(n) & ~others & ~mine
    need = count - popcount(mine)
    if need == 0:
        return mine
    job = instance.queue[item.position]
    nvlink = item.mode is Mode.SINGLE and needs_nvlink(job)
    picked: int | None = None
    if not mine and count == job.gpu_count and prices_nvlink(instance, item.position):
        picked = choose_gpus(topo, free, need, True)  # linked if it can be: cheaper
    if picked is None:
        picked = choose_gpus(topo, free, need, nvlink)
    if picked is None:
        raise RuntimeError(f"model start of job {item.position} has no free GPUs")
    return mine | picked
