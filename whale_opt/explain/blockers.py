"""What holds a job back whatever order the round picks: hardware that can never
hold it, draining nodes, its tenant's quota, a guarantee not reclaimed, and
eligible GPUs that are busy or scattered. Also the decided timeline (running
jobs plus the decision's other placements) the reasons are measured against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from whale_opt.decision import Action, Decision
from whale_opt.explain.record import Reason
from whale_opt.placement.reasons import deferral_reason
from whale_opt.placement.records import to_placement
from whale_opt.placement.state import ClusterState, Placement
from whale_opt.problem_data import MILLI, Instance, class_rank, tenant_guarantee, tenant_quota
from whale_opt.rules import held_by_tenant, may_displace, preemptible_now


def _alone(instance: Instance, position: int, **job_changes: Any) -> Placement | None:
    """Placement of the (edited) job alone on the empty, healthy-as-is cluster, its
    tenant's quota lifted (a quota is no hardware: the quota reason tells it)."""
    job = instance.queue[position]
    edited = replace(job, **job_changes)
    solo = _without_quota(instance, job.tenant).replace(running=(), queue=(edited,))
    return ClusterState(solo).best_placement(0, by_start=True)


def _no_hardware(instance: Instance, position: int) -> Reason | None:
    """No hardware can ever hold the job: say which of type, memory, topology fails."""
    job = instance.queue[position]
    if _alone(instance, position) is not None:
        return None
    if any(node.draining for node in instance.nodes):
        open_ = _undrained(instance)
        if _alone(open_, position) is not None:
            ids = [
                instance.nodes[k].id
                for k in ClusterState(open_).eligible(position)
                if instance.nodes[k].draining
            ]
            return Reason(
                "draining",
                f"every node that could hold it is draining (takes no new work): {', '.join(ids)}",
                {"nodes": ids},
            )
    asked = list(job.gpu_types or instance.gpu_types)
    # A type the job has no duration for cannot run it: it is not asked in effect.
    by_type = dict(job.duration_by_type_s)
    timed = [name for name in asked if job.duration_s is not None or name in by_type]
    healthy_types = sorted({n.gpu_type for n in instance.nodes if n.healthy_indices})
    present = [name for name in timed if name in healthy_types]
    memory = {name: instance.gpu_types[name].memory_gb for name in present}
    facts: dict[str, Any] = {
        "gpu_types": asked,
        "types_with_duration": timed,
        "types_in_cluster": healthy_types,
        "min_gpu_memory_gb": job.min_gpu_memory_gb,
        "gpus": job.gpu_count,
        "topology": job.topology,
        "fails": [],
    }
    words = []
    if not present:
        facts["fails"].append("type")
        untimed = [name for name in asked if name not in timed and name in healthy_types]
        words.append(f"no healthy node has GPU type {', '.join(timed) or 'none'}")
        if untimed:
            words.append(f"it has no duration on {', '.join(untimed)}")
    elif all(m < job.min_gpu_memory_gb for m in memory.values()):
        facts["fails"].append("memory")
        words.append(
            f"needs >= {job.min_gpu_memory_gb:g} GB GPU memory, the largest allowed type in the"
            f" cluster has {max(memory.values()):g} GB"
        )
    else:
        tl = ClusterState(instance)
        types = set(instance.eligible_types[position])
        nodes = [k for k, n in enumerate(instance.nodes) if n.gpu_type in types]
        block = max(
            (tl.topology(k).largest_block(tl.topology(k).healthy) for k in nodes), default=0
        )
        facts["fails"].append("topology")
        facts["largest_nvlink_block"] = block
        facts["eligible_nodes"] = [instance.nodes[k].id for k in tl.eligible(position)]
        if facts["eligible_nodes"]:
            words.append(
                f"needs {job.gpu_count} GPUs as '{job.topology}'; the largest healthy NVLink"
                f" block of {', '.join(sorted(types))} is {block} and the nodes that could take"
                f" part are {', '.join(facts['eligible_nodes'])}"
            )
        else:  # no node set can ever hold it: what the decision's deferral says
            words.append(
                f"needs {job.gpu_count} GPUs as '{job.topology}': "
                + deferral_reason(instance, position, tl)
            )
    return Reason(
        "no-hardware", "no hardware in the cluster meets the request: " + "; ".join(words), facts
    )


def _undrained(instance: Instance) -> Instance:
    """``instance`` with every draining node open to new work again."""
    return instance.replace(nodes=tuple(replace(node, draining=False) for node in instance.nodes))


def _draining(instance: Instance, decision: Decision, position: int, start: float) -> Reason | None:
    """Draining nodes on which the job would start before ``start`` if they took new work."""
    if not any(node.draining for node in instance.nodes):
        return None
    opened = decided_timeline(_undrained(instance), decision, position)
    found = opened.best_placement(position, by_start=True)
    if found is None or found.start >= start:
        return None
    ids = [instance.nodes[k].id for k in found.nodes]
    if not any(instance.nodes[k].draining for k in found.nodes):
        return None
    return Reason(
        "draining",
        f"could start at {found.start} s on {', '.join(ids)}, but draining nodes take no new work",
        {"could_start_s": found.start, "nodes": ids},
    )


def _guarantee(instance: Instance, decision: Decision, position: int) -> Reason | None:
    """A tenant below its guarantee that did not reclaim borrowed GPUs, and why."""
    job = instance.queue[position]
    guaranteed = tenant_guarantee(instance, job.tenant)
    held = held_by_tenant(instance)
    if held.get(job.tenant, 0) >= guaranteed:
        return None
    eligible = {instance.nodes[k].id for k in ClusterState(instance).eligible(position)}
    borrowers = [
        r
        for r, running in enumerate(instance.running)
        if class_rank(instance, running) >= class_rank(instance, job)
        and may_displace(instance, running, job, held)
        and {gpu.rpartition("/")[0] for gpu in running.gpu_ids} & eligible
    ]
    if not borrowers:
        return None
    if not instance.policy.allow_preemption:
        why = "policy.allow_preemption is off"
    elif not any(preemptible_now(instance, r) for r in borrowers):
        why = "none of them may be preempted now (not preemptible, or run < min_run_s)"
    else:
        why = "preempting them would cost more than the job gains, or frees no place it fits"
    ids = [instance.running[r].id for r in borrowers]
    return Reason(
        "guarantee",
        f"tenant {job.tenant} holds {held.get(job.tenant, 0)} of its {guaranteed} guaranteed"
        f" GPUs; {', '.join(ids)} hold GPUs borrowed beyond their tenants' guarantees on its"
        f" nodes, but {why}",
        {
            "tenant": job.tenant,
            "guaranteed": guaranteed,
            "held": held.get(job.tenant, 0),
            "borrowers": ids,
        },
    )


def _without_quota(instance: Instance, tenant: str) -> Instance:
    return instance.replace(tenants={k: v for k, v in instance.tenants.items() if k != tenant})


def after_preemptions(instance: Instance, decision: Decision) -> Instance:
    """``instance`` without the running jobs ``decision`` preempts: what stays running."""
    preempted = {item.id for item in decision.by_action(Action.PREEMPT)}
    if not preempted & set(instance.running_index):
        return instance
    return instance.replace(running=tuple(r for r in instance.running if r.id not in preempted))


def decided_timeline(instance: Instance, decision: Decision, skip: int) -> ClusterState:
    """Running jobs the decision keeps plus every other queued job where it put it."""
    tl = ClusterState(after_preemptions(instance, decision))
    for position, job in enumerate(instance.queue):
        if position == skip:
            continue
        placement = to_placement(instance, position, decision.job(job.id))
        if placement is not None:
            tl.commit(position, placement)
    return tl


def running_holders(instance: Instance, nodes: Iterable[int]) -> list[dict[str, Any]]:
    ids = {instance.nodes[k].id for k in nodes}
    out = []
    for job in instance.running:
        on = sorted({g.rpartition("/")[0] for g in job.gpu_ids} & ids)
        if on:
            out.append(
                {"job": job.id, "nodes": on, "gpus": len(job.gpu_ids), "ends_s": job.remaining_s}
            )
    return sorted(out, key=lambda h: (h["ends_s"], h["job"]))


def _busy(instance: Instance, position: int, free_start: float) -> list[Reason]:
    """Eligible GPUs held by running jobs; or free but scattered."""
    job = instance.queue[position]
    tl = ClusterState(_without_quota(instance, job.tenant))
    eligible = tl.eligible(position)
    free = {instance.nodes[k].id: tl.free_count(k) for k in eligible}
    free = {n: c for n, c in free.items() if c}
    out = []
    until = None if free_start == float("inf") else int(free_start)
    holders = running_holders(instance, eligible)
    named = ", ".join(f"{h['job']} ({'+'.join(h['nodes'])}, ends {h['ends_s']} s)" for h in holders)
    when = f"until {until} s" if until is not None else "past the horizon"
    out.append(
        Reason(
            "busy",
            f"eligible GPUs are busy {when}: held by {named or 'no running job'}",
            {"until_s": until, "holders": holders},
        )
    )
    if job.shares:
        out.append(_share_room(instance, tl, eligible, job.gpu_milli))
    elif job.gpu_count and sum(free.values()) >= job.gpu_count:
        where = ", ".join(f"{n} {c} free" for n, c in free.items())
        out.append(
            Reason(
                "scattered",
                f"{sum(free.values())} eligible GPUs are free now but scattered ({where});"
                f" no single placement holds {job.gpu_count} as '{job.topology}'",
                {"free": free, "gpus": job.gpu_count, "topology": job.topology},
            )
        )
    return out


def _share_room(
    instance: Instance, tl: ClusterState, eligible: Sequence[int], milli: int
) -> Reason:
    """Why a share of ``milli`` does not start now: no GPU has that much free, or the
    GPU that has lacks CPU or memory on its node."""
    best, where = 0, ""
    for k in eligible:
        node = instance.nodes[k]
        room = [(MILLI - used, index) for index, (used, _) in tl.shares_now(k).items()]
        free = tl.free_mask(k)
        if free:
            room.append((MILLI, (free & -free).bit_length() - 1))
        for left, index in room:
            if left > best:
                best, where = left, node.gpu_id(index)
    facts = {"gpu_milli": milli, "largest_free_milli": best, "gpu": where or None}
    if best < milli:
        largest = f"the largest free share is {best} on {where}" if where else "none is free"
        return Reason("share", f"no single GPU has {milli} milli free; {largest}", facts)
    return Reason(
        "share",
        f"GPU {where} has {best} milli free, but its node lacks the CPU or memory the job needs",
        facts,
    )


def _tenant_peak(
    instance: Instance, decision: Decision, position: int, start: int, end: int
) -> tuple[float, int]:
    """The most GPUs the job's tenant holds in [``start``, ``end``) with its running
    jobs and the decision's other placements, and when."""
    job = instance.queue[position]
    spans = [(0, r.remaining_s, r.gpu_amount) for r in instance.running if r.tenant == job.tenant]
    for other in instance.queue:
        item = decision.job(other.id)
        if other.tenant == job.tenant and other.id != job.id and item.start_s is not None:
            spans.append((item.start_s, item.end_s or item.start_s, other.gpu_amount))
    # Use only rises when a span begins: the peak is at the window's start or one of those.
    times = [start] + [a for a, _, _ in spans if start < a < end]
    return max((sum(amount for a, b, amount in spans if a <= t < b), t) for t in sorted(times))


def quota_reason(
    instance: Instance, position: int, decision: Decision, could: Placement | None = None
) -> Reason:
    """The tenant's quota holds the job back: the GPUs in use now; or, given ``could``
    (where it would go without the quota, after the decision's other placements),
    the most in use over that run and when. ``instance`` holds the running jobs
    the decision keeps (:func:`after_preemptions`)."""
    job = instance.queue[position]
    quota = tenant_quota(instance, job.tenant)
    running = sum(r.gpu_amount for r in instance.running if r.tenant == job.tenant)
    amounts = {q.id: q.gpu_amount for q in instance.queue if q.tenant == job.tenant}
    started = sum(
        amounts[item.id]
        for item in decision.by_action(Action.START)
        if item.id in amounts and item.id != job.id
    )
    facts: dict[str, Any] = {
        "tenant": job.tenant,
        "quota": quota,
        "in_use": running + started,
        # quotas are whole GPUs: the smallest that would let it in
        "needed_quota": math.ceil(running + job.gpu_amount - 1e-9),
        "needed_quota_with_started": math.ceil(running + started + job.gpu_amount - 1e-9),
    }
    needs = f"the job needs {job.gpu_amount:g}"
    if could is None:
        return Reason(
            "quota",
            f"tenant {job.tenant} quota reached: {running + started:g} of {quota} GPUs in use"
            f" now ({running:g} running, {started:g} started this round), {needs}",
            facts,
        )
    peak, when = _tenant_peak(instance, decision, position, could.start, could.end)
    facts.update(
        could_start_s=could.start,
        could_end_s=could.end,
        peak_in_use=peak,
        peak_at_s=when,
        needed_quota_then=math.ceil(peak + job.gpu_amount - 1e-9),
    )
    return Reason(
        "quota",
        f"tenant {job.tenant} quota reached: it could start at {could.start} s, but its run"
        f" would overlap {peak:g} of {quota} GPUs in use at {when} s (running jobs and the"
        f" round's starts and plans), {needs}",
        facts,
    )
