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
A job the decision starts later than it could (or defers though it could
start) is told why, as the model sees it: waiting ends no later (faster-later;
a deferred job is priced as ending at the horizon plus its shortest duration),
the sooner placement's type is priced per GPU-second beyond what waiting
saves (price), or the sooner placement drops soft preferences (preference).

The reasons that depend on what the round decided for other jobs
(outranked, faster-later, preference) are here with :func:`reasons`, which
puts all together; :mod:`~whale_opt.explain.blockers` holds the hardware,
draining, quota, guarantee and busy reasons, :mod:`~whale_opt.explain.ceiling`
the wait-ceiling ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whale_opt import preferences
from whale_opt.decision import (
    Action,
    Decision,
    JobDecision,
    deferred_usage,
    dropped_preferences,
    job_nodes,
    placed_type,
)
from whale_opt.explain.blockers import _busy, _draining, _guarantee, _no_hardware, _without_quota
from whale_opt.explain.blockers import after_preemptions as after_preemptions
from whale_opt.explain.blockers import decided_timeline as decided_timeline
from whale_opt.explain.blockers import quota_reason as quota_reason
from whale_opt.explain.blockers import running_holders as running_holders
from whale_opt.explain.ceiling import _overdue_rivals, _past_ceiling
from whale_opt.explain.record import REASON_KINDS as REASON_KINDS
from whale_opt.explain.record import Reason as Reason
from whale_opt.placement.state import ClusterState, Placement
from whale_opt.policies.wspt import smith_ratio
from whale_opt.problem_data import Instance, class_rank, tenant_quota


def _ratio(instance: Instance, position: int) -> float:
    return smith_ratio(instance, position)


def _outranked(
    instance: Instance, position: int, decision: Decision, before: float, eligible: Sequence[int]
) -> Reason | None:
    """Queued jobs placed on the job's eligible nodes to start by ``before`` (its own start;
    one starting with it was placed first, taking room it would need), higher classes first."""
    ids = {instance.nodes[k].id for k in eligible}
    mine = _ratio(instance, position)
    job = instance.queue[position]
    rank = class_rank(instance, job)
    rivals: list[dict[str, Any]] = []
    for k, other in enumerate(instance.queue):
        item = decision.job(other.id)
        if k == position or item.start_s is None or item.start_s > before:
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


def _sooner(instance: Instance, position: int, item: JobDecision, now: Placement) -> Reason | None:
    """Why the job waits though ``now`` starts it sooner: waiting ends no later (a
    deferred job is priced as ending at the horizon plus its shortest duration), or
    the sooner placement drops soft preferences the plan keeps."""
    where = [instance.nodes[k].id for k in now.nodes]
    could = (
        f"could start at {now.start} s on {', '.join(where)} ({now.gpu_type}) ending {now.end} s"
    )
    facts: dict[str, Any] = {"could_start_s": now.start, "could_end_s": now.end, "nodes": where}
    deferred = item.end_s is None
    end = instance.deferred_cost_end(position) if item.end_s is None else item.end_s
    if end <= now.end:
        how = "sooner" if end < now.end else "as soon"
        if deferred:
            but = (
                f"deferred it is priced as ending {how}, at {end} s (the horizon,"
                f" {instance.policy.horizon_s} s, plus its shortest duration on a type the"
                " cluster has)"
            )
        else:
            but = f"waiting for {', '.join(job_nodes(item))} ends {how}, at {end} s"
        facts.update(planned_end_s=end, deferred=deferred)
        return Reason("faster-later", f"{could}, but {but}", facts)
    priced = _priced_out(instance, position, item, now, end)
    if priced is not None:
        words, more = priced
        facts.update(more)
        return Reason("price", f"{could}, but {words}", facts)
    per_node = dict(zip(now.nodes, now.counts, strict=True))
    masks = dict(zip(now.nodes, now.masks, strict=True)) if now.masks else None
    kept = set(dropped_preferences(instance, position, item))
    names = tuple(
        n for n in preferences.dropped(instance, position, per_node, masks) if n not in kept
    )
    if not names:
        return None
    cost = preferences.price(instance, position, names)
    facts.update(would_drop=list(names), penalty=cost)
    return Reason(
        "preference",
        f"{could}, but that drops its preference for {', '.join(names)} (penalty {cost:g});"
        f" {'deferred' if deferred else 'waiting'} it keeps them",
        facts,
    )


def _priced_out(
    instance: Instance, position: int, item: JobDecision, now: Placement, end: float
) -> tuple[str, dict[str, Any]] | None:
    """Whether the sooner placement ``now`` costs more than the plan (ending at ``end``)
    because of its type's GPU-second price: the words and facts that say so."""
    price_now = instance.usage_price(position, now.gpu_type)
    if not price_now:
        return None
    weight = instance.weights[position]
    if item.end_s is None:
        planned, where = deferred_usage(instance, position), "more for deferring it"
    else:
        gpu_type = placed_type(instance, item)
        if gpu_type is None:
            return None
        planned, where = instance.usage_price(position, gpu_type), f"on {gpu_type}"
    cost_now, cost_planned = weight * now.end + price_now, weight * end + planned
    if price_now <= planned or cost_planned > cost_now:
        return None
    per_gpu_s = instance.policy.gpu_second_price(now.gpu_type)
    words = (
        f"{now.gpu_type} GPU-seconds are priced at {per_gpu_s:g} weighted s each"
        f" (policy.gpu_second_prices): {price_now:g} there against {planned:g} {where},"
        f" so waiting costs less ({cost_planned:g} against {cost_now:g} weighted s)"
    )
    facts = {
        "gpu_type": now.gpu_type,
        "price_now": price_now,
        "price_planned": planned,
        "cost_now": cost_now,
        "cost_planned": cost_planned,
    }
    return words, facts


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
    """Why queued job ``position`` is not started in ``decision``, most decisive first.

    The running jobs the decision preempts hold nothing: the reasons are measured
    against those it keeps.
    """
    hardware = _no_hardware(instance, position)
    if hardware is not None:
        return [hardware]
    instance = after_preemptions(instance, decision)
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
            found.append(quota_reason(instance, position, decision, d_nq))
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
    if now is not None and now.start < start:
        sooner = _sooner(instance, position, item, now)
        if sooner is not None:
            found.append(sooner)
    preference = preference_reason(instance, position, item, decided)
    if preference is not None:
        found.append(preference)
    return found
