"""Why is a queued job not started? Reasons derived from the model itself.

Reasons come from targeted re-placements with the same
:class:`~whale_opt.placement.state.ClusterState` the policies use, on edited
instances: the job alone on an empty cluster (hardware), with only the
running jobs (busy, scattered), with its tenant's quota lifted (quota), with
draining nodes open again (draining), and against the round's decision
(outranked, by priority class first; preferences). A tenant below its
guaranteed share is told why it did not reclaim borrowed GPUs (guarantee).
A job past its wait ceiling is told so, with the start that implies, and a
job that overdue jobs went ahead of is told which (ceiling).
Weights are effective weights (class factor, aging and the overdue lift).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from whale_opt import preferences
from whale_opt.decision import Action, Decision, JobDecision, dropped_preferences, job_nodes
from whale_opt.placement.records import to_placement
from whale_opt.placement.state import ClusterState, Placement
from whale_opt.policies.wspt import smith_ratio
from whale_opt.problem_data import (
    Instance,
    class_rank,
    tenant_guarantee,
    tenant_quota,
    waited_s,
)
from whale_opt.rules import held_by_tenant, may_displace, preemptible_now

REASON_KINDS = (
    "ceiling",
    "no-hardware",
    "draining",
    "quota",
    "guarantee",
    "busy",
    "scattered",
    "outranked",
    "faster-later",
    "preference",
)


@dataclass(frozen=True)
class Reason:
    """One reason a job is not started: ``kind`` (REASON_KINDS), words, facts."""

    kind: str
    message: str
    facts: Mapping[str, Any] = field(default_factory=dict)


def _ratio(instance: Instance, position: int) -> float:
    return smith_ratio(instance, position)


def _hours(seconds: float) -> str:
    """``93600`` -> ``"26 h"``, ``5400`` -> ``"1.5 h"``, ``1000`` -> ``"17 min"``."""
    if abs(seconds) < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f}".rstrip("0").rstrip(".") + " h"


def _overdue_order(instance: Instance) -> list[int]:
    """Overdue queue positions in the order they go: first past its ceiling first."""
    overdue = [k for k, late in enumerate(instance.overdue) if late]
    return sorted(
        overdue,
        key=lambda k: (
            instance.ceiling_at(k),
            instance.queue[k].submitted_at,
            instance.queue[k].id,
        ),
    )


def _past_ceiling(instance: Instance, decision: Decision, position: int, ceiling: int) -> Reason:
    """The job is past ``ceiling``: it goes ahead of every job that is not; when it starts."""
    job = instance.queue[position]
    waited = waited_s(job)
    order = _overdue_order(instance)
    ahead = [
        instance.queue[k].id
        for k in order[: order.index(position)]
        if decision.job(instance.queue[k].id).action is not Action.START
    ]
    item = decision.job(job.id)
    turn = (
        "runs next"
        if not ahead
        else f"runs after {len(ahead)} job(s) past their ceilings before it ({', '.join(ahead)})"
    )
    if item.start_s is not None:
        when = f"expected start {item.start_s} s (in {_hours(item.start_s)})"
    else:
        when = "no start planned within the horizon"
    return Reason(
        "ceiling",
        f"waited {_hours(waited)} > max_wait_s {_hours(ceiling)} (class {job.priority_class}):"
        f" overdue, it goes ahead of every job that is not and {turn}; {when}",
        {
            "waited_s": waited,
            "max_wait_s": ceiling,
            "overdue": True,
            "overdue_by_s": waited - ceiling,
            "ahead": ahead,
            "expected_start_s": item.start_s,
        },
    )


def _overdue_rivals(
    instance: Instance, position: int, decision: Decision, before: float, eligible: Sequence[int]
) -> Reason | None:
    """Overdue jobs placed before ``before`` on the job's eligible nodes: they go first."""
    ids = {instance.nodes[k].id for k in eligible}
    job = instance.queue[position]
    rivals: list[dict[str, Any]] = []
    for k in _overdue_order(instance):
        other = instance.queue[k]
        item = decision.job(other.id)
        if k == position or item.start_s is None or item.start_s >= before:
            continue
        if set(job_nodes(item)) & ids or (
            other.tenant == job.tenant and tenant_quota(instance, job.tenant)
        ):
            rivals.append(
                {
                    "job": other.id,
                    "priority_class": other.priority_class,
                    "waited_s": waited_s(other),
                    "max_wait_s": instance.max_wait(other),
                    "start_s": item.start_s,
                    "nodes": list(job_nodes(item)),
                }
            )
    if not rivals:
        return None
    named = ", ".join(
        f"{r['job']} (waited {_hours(r['waited_s'])} > {_hours(r['max_wait_s'])})" for r in rivals
    )
    ceiling = instance.max_wait(job)
    if ceiling is None:
        own = f"its class {job.priority_class} has no ceiling"
    else:
        left = ceiling - waited_s(job)
        own = f"its own ceiling, {_hours(ceiling)}, is {_hours(left)} away"
    return Reason(
        "ceiling",
        f"jobs past their wait ceiling go first, across classes: {named}; {own}",
        {"overdue": False, "waited_s": waited_s(job), "max_wait_s": ceiling, "by": rivals},
    )


def _alone(instance: Instance, position: int, **job_changes: Any) -> Placement | None:
    """Placement of the (edited) job alone on the empty, healthy-as-is cluster."""
    job = instance.queue[position]
    edited = replace(job, **job_changes)
    solo = instance.replace(running=(), queue=(edited,))
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
    healthy_types = sorted({n.gpu_type for n in instance.nodes if n.healthy_indices})
    memory = {name: instance.gpu_types[name].memory_gb for name in asked}
    facts: dict[str, Any] = {
        "gpu_types": asked,
        "types_in_cluster": healthy_types,
        "min_gpu_memory_gb": job.min_gpu_memory_gb,
        "gpus": job.gpu_count,
        "topology": job.topology,
        "fails": [],
    }
    words = []
    if not set(asked) & set(healthy_types):
        facts["fails"].append("type")
        words.append(f"no healthy node has GPU type {', '.join(asked)}")
    elif all(m < job.min_gpu_memory_gb for m in memory.values()):
        facts["fails"].append("memory")
        words.append(
            f"needs >= {job.min_gpu_memory_gb:g} GB GPU memory, the largest allowed type has"
            f" {max(memory.values()):g} GB"
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
        words.append(
            f"needs {job.gpu_count} GPUs as '{job.topology}'; the largest healthy NVLink block of"
            f" {', '.join(sorted(types))} is {block} and the nodes that could take part are"
            f" {', '.join(facts['eligible_nodes']) or 'none'}"
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


def decided_timeline(instance: Instance, decision: Decision, skip: int) -> ClusterState:
    """Running jobs plus every other queued job where the decision put it."""
    tl = ClusterState(instance)
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
    if sum(free.values()) >= job.gpu_count:
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


def quota_reason(instance: Instance, position: int, decision: Decision) -> Reason:
    job = instance.queue[position]
    quota = tenant_quota(instance, job.tenant)
    running = sum(len(r.gpu_ids) for r in instance.running if r.tenant == job.tenant)
    tenant_ids = {q.id for q in instance.queue if q.tenant == job.tenant and q.id != job.id}
    started = sum(
        len(item.gpu_ids) for item in decision.by_action(Action.START) if item.id in tenant_ids
    )
    return Reason(
        "quota",
        f"tenant {job.tenant} quota reached: {running + started} of {quota} GPUs in use now"
        f" ({running} running, {started} started this round), the job needs {job.gpu_count}",
        {
            "tenant": job.tenant,
            "quota": quota,
            "in_use": running + started,
            "needed_quota": running + job.gpu_count,
            "needed_quota_with_started": running + started + job.gpu_count,
        },
    )


def _outranked(
    instance: Instance, position: int, decision: Decision, before: float, eligible: Sequence[int]
) -> Reason | None:
    """Queued jobs placed before ``before`` on the job's eligible nodes, higher classes first."""
    ids = {instance.nodes[k].id for k in eligible}
    mine = _ratio(instance, position)
    job = instance.queue[position]
    rank = class_rank(instance, job)
    rivals: list[dict[str, Any]] = []
    for k, other in enumerate(instance.queue):
        item = decision.job(other.id)
        if k == position or item.start_s is None or item.start_s >= before:
            continue
        if instance.overdue[k]:
            continue  # went first for its wait, not its rank: see _overdue_rivals
        if set(job_nodes(item)) & ids or (
            other.tenant == job.tenant and tenant_quota(instance, job.tenant)
        ):
            rivals.append(
                {
                    "job": other.id,
                    "weight": other.weight,
                    "effective_weight": instance.weights[k],
                    "priority_class": other.priority_class,
                    "rank": class_rank(instance, other),
                    "ratio": _ratio(instance, k),
                    "start_s": item.start_s,
                    "nodes": list(job_nodes(item)),
                }
            )
    if not rivals:
        return None
    rivals.sort(key=lambda r: (-r["rank"], -r["ratio"], r["job"]))

    def named(group: list[dict[str, Any]]) -> str:
        return ", ".join(
            f"{r['job']} (weight {r['weight']:g}, ratio {r['ratio'] / mine:.2g}x)"
            if mine
            else r["job"]
            for r in group
        )

    higher = [r for r in rivals if r["rank"] > rank]
    same = [r for r in rivals if r["rank"] <= rank]
    if higher:
        classes = ", ".join(sorted({r["priority_class"] for r in higher}))
        head = f"outranked by higher priority class {classes}: {named(higher)}"
        head += f", and by {named(same)}" if same else ""
    else:
        head = f"outranked by {named(same)}"
    return Reason(
        "outranked",
        f"{head}: they took its GPUs first (its class {job.priority_class}, weight"
        f" {job.weight:g}, WSPT ratio {mine:.3g})",
        {
            "weight": job.weight,
            "effective_weight": instance.weights[position],
            "priority_class": job.priority_class,
            "ratio": mine,
            "by": rivals,
        },
    )


def preference_reason(
    instance: Instance, position: int, item: JobDecision, tl: ClusterState
) -> Reason | None:
    """The soft preferences the placement drops and their price; or, for a zone
    honoured, how much sooner the job could start outside it."""
    job = instance.queue[position]
    names = dropped_preferences(instance, position, item)
    nodes = list(job_nodes(item))
    if names:
        cost = preferences.price(instance, position, names)
        where = [instance.nodes[instance.node_index[n]] for n in nodes]
        words = []
        facts: dict[str, Any] = {"dropped": list(names), "penalty": cost, "nodes": nodes}
        if "zone" in names:
            outside = [n.id for n in where if n.zone != job.zone]
            words.append(f"placed outside zone {job.zone} on {', '.join(outside)}")
            facts.update(zone=job.zone, nodes=outside)
        if "gpu_type" in names:
            liked = ", ".join(job.preferred_gpu_types)
            words.append(f"placed on {where[0].gpu_type}, not a preferred {liked}")
        if "nvlink" in names:
            words.append("placed on GPUs that are not NVLink-connected")
        return Reason("preference", f"{'; '.join(words)}: penalty {cost:g}", facts)
    if job.zone is None:
        return None
    cost = preferences.price(instance, position, ("zone",))
    away = frozenset(k for k, n in enumerate(instance.nodes) if n.zone != job.zone)
    other = tl.best_placement(position, by_start=True, within=away)
    start = item.start_s if item.start_s is not None else instance.policy.horizon_s
    if other is not None and other.start < start:
        where_ids = [instance.nodes[k].id for k in other.nodes]
        return Reason(
            "preference",
            f"zone {job.zone} preference: could start at {other.start} s on"
            f" {', '.join(where_ids)} outside it (penalty {cost:g})",
            {"zone": job.zone, "penalty": cost, "could_start_s": other.start, "nodes": where_ids},
        )
    return None


def reasons(instance: Instance, decision: Decision, position: int) -> list[Reason]:
    """Why queued job ``position`` is not started in ``decision``, most decisive first."""
    hardware = _no_hardware(instance, position)
    if hardware is not None:
        return [hardware]
    job = instance.queue[position]
    item = decision.job(job.id)
    inf = float("inf")
    run = ClusterState(instance).best_placement(position, by_start=True)
    free_q = _without_quota(instance, job.tenant)
    run_nq = ClusterState(free_q).best_placement(position, by_start=True)
    start_q = inf if run is None else run.start
    start_nq = inf if run_nq is None else run_nq.start
    decided = decided_timeline(instance, decision, position)
    found: list[Reason] = []
    ceiling = instance.max_wait(job)
    if instance.overdue[position] and ceiling is not None:
        found.append(_past_ceiling(instance, decision, position, ceiling))
    limited = tenant_quota(instance, job.tenant) is not None
    if limited and start_q > start_nq:
        found.append(quota_reason(instance, position, decision))
    elif limited and item.action is not Action.START:
        d_q = decided.best_placement(position, by_start=True)
        d_nq = decided_timeline(free_q, decision, position).best_placement(position, by_start=True)
        if d_nq is not None and (d_q is None or d_nq.start < d_q.start):
            found.append(quota_reason(instance, position, decision))
    start = inf if item.start_s is None else item.start_s
    guarantee = _guarantee(instance, decision, position)
    if guarantee is not None:
        found.append(guarantee)
    if start_nq > 0:
        found += _busy(instance, position, start_nq)
    draining = _draining(instance, decision, position, start)
    if draining is not None:
        found.append(draining)
    now = decided.best_placement(position, by_start=True)
    d_start = inf if now is None else now.start
    if d_start > start_q:
        eligible = decided.eligible(position)
        # An overdue job's own ceiling reason already names the overdue jobs before it.
        late = (
            None
            if instance.overdue[position]
            else _overdue_rivals(instance, position, decision, start, eligible)
        )
        if late is not None:
            found.append(late)
        rival = _outranked(instance, position, decision, start, eligible)
        if rival is not None:
            found.append(rival)
    if now is not None and now.start < start and item.end_s is not None:
        where = [instance.nodes[k].id for k in now.nodes]
        found.append(
            Reason(
                "faster-later",
                f"could start at {now.start} s on {', '.join(where)} ({now.gpu_type}) ending"
                f" {now.end} s, but waiting for {', '.join(job_nodes(item))} ends sooner,"
                f" at {item.end_s} s",
                {
                    "could_start_s": now.start,
                    "could_end_s": now.end,
                    "nodes": where,
                    "planned_end_s": item.end_s,
                },
            )
        )
    preference = preference_reason(instance, position, item, decided)
    if preference is not None:
        found.append(preference)
    return found
