"""Explain on random rounds (the public strategies): what it tells a user is true.

Each drawn round is solved with a few policies, and every queued job the
decision does not start is explained. Explain must not raise, must give every
such job a reason of a known kind, and each reason's facts are checked here
without the explain code: against the instance, the decision, the placement
engine's eligibility, or a re-solve of an edited instance. Every
counterfactual is applied here by its meaning and re-solved with the same
policy: the job starts exactly when it says ``verified``, and the new
decision passes the checker.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, job_nodes
from whale_opt.explain import REASON_KINDS, Change, Explanation, Reason, explain
from whale_opt.options import SolveOptions
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import (
    Instance,
    QueuedJob,
    RunningJob,
    Tenant,
    class_rank,
    tenant_guarantee,
    tenant_quota,
    waited_s,
)
from whale_opt.solve import solve
from whale_opt.testing import instances

INF = math.inf
# cpsat: the deterministic preset, with a wall limit it does not reach on these
# small rounds, so the re-solves here see the decisions explain saw.
OPTIONS = {
    "wspt": SolveOptions(time_limit_s=1.0),
    "frag-aware": SolveOptions(time_limit_s=1.0),
    "fifo": SolveOptions(time_limit_s=1.0),
    "cpsat": SolveOptions(time_limit_s=1.0, preset="deterministic"),
}
PREFERENCES = {"zone": "zone", "gpu_type": "preferred_gpu_types", "nvlink": "prefer_nvlink"}


@st.composite
def _some_overdue(draw: st.DrawFn, base: st.SearchStrategy[Instance]) -> Instance:
    """A round of ``base`` where some queued jobs have waited past their ceiling."""
    instance = draw(base)
    queue = []
    for job in instance.queue:
        ceiling = instance.max_wait(job)
        if ceiling is not None and draw(st.booleans()):
            job = replace(job, submitted_at=-ceiling - draw(st.integers(1, 7_200)))
        queue.append(job)
    return instance.replace(queue=tuple(queue))


def rounds() -> st.SearchStrategy[Instance]:
    """Small rounds: plain; with preemption, sharing and preferences; with priority,
    aging, guarantees and draining; with priority, guarantees and preemption; with
    jobs past their wait ceiling."""
    return st.one_of(
        instances(max_nodes=4, max_queue=6, max_running=4, min_queue=1),
        instances(
            max_nodes=4,
            max_queue=5,
            min_queue=1,
            preemption=True,
            sharing=True,
            preferences=True,
        ),
        instances(
            max_nodes=4,
            max_queue=5,
            min_queue=1,
            with_failures=False,
            priority=True,
            aging=True,
            guarantees=True,
            draining=True,
        ),
        instances(
            max_nodes=4,
            max_queue=5,
            min_queue=1,
            priority=True,
            guarantees=True,
            preemption=True,
        ),
        _some_overdue(instances(max_nodes=4, max_queue=5, min_queue=2, priority=True)),
    )


# -- independent views of the round ---------------------------------------------------


def _start(decision: Decision, job_id: str) -> float:
    start = decision.job(job_id).start_s
    return INF if start is None else start


def _alone(instance: Instance, job: QueuedJob, **changes: Any) -> JobDecision:
    """The job's decision when it is the only queued job (``changes`` to the instance)."""
    edited = instance.replace(queue=(job,), **changes)
    return solve(edited, "wspt").job(job.id)


def _undrained(instance: Instance) -> Instance:
    return instance.replace(nodes=tuple(replace(n, draining=False) for n in instance.nodes))


def _no_quota(instance: Instance, tenant: str) -> dict[str, Tenant]:
    return {name: t for name, t in instance.tenants.items() if name != tenant}


def _gpu_nodes(job: RunningJob) -> set[str]:
    return {gpu.rpartition("/")[0] for gpu in job.gpu_ids}


def _kept(instance: Instance, decision: Decision) -> tuple[RunningJob, ...]:
    """The running jobs the decision does not preempt."""
    preempted = {item.id for item in decision.by_action(Action.PREEMPT)}
    return tuple(r for r in instance.running if r.id not in preempted)


def _free_now(instance: Instance, decision: Decision, node_id: str) -> int:
    """Healthy GPUs of ``node_id`` no running job the decision keeps holds (a share
    holds its GPU)."""
    node = instance.nodes[instance.node_index[node_id]]
    held = {g for job in _kept(instance, decision) for g in job.gpu_ids}
    return sum(1 for i in node.healthy_indices if node.gpu_id(i) not in held)


def _tenant_use(instance: Instance, decision: Decision, job: QueuedJob, at: int) -> float:
    """GPUs the job's tenant holds at ``at`` s: running jobs not preempted and not yet
    done, and the round's other starts and plans under way."""
    preempted = {item.id for item in decision.by_action(Action.PREEMPT)}
    running = sum(
        r.gpu_amount
        for r in instance.running
        if r.tenant == job.tenant and r.id not in preempted and r.remaining_s > at
    )
    decided = 0.0
    for q in instance.queue:
        item = decision.job(q.id)
        if q.tenant == job.tenant and q.id != job.id and item.start_s is not None:
            assert item.end_s is not None
            decided += q.gpu_amount if item.start_s <= at < item.end_s else 0.0
    return running + decided


# -- one check per reason kind ----------------------------------------------------------


def _check_no_hardware(instance: Instance, job: QueuedJob, reason: Reason) -> None:
    # Nothing running, nothing else queued, draining nodes open, no quota: still no place.
    empty = _undrained(instance).replace(running=(), tenants=_no_quota(instance, job.tenant))
    assert _alone(empty, job).action is Action.DEFERRED
    # The types it may use (asked, with a duration known) that some healthy node has.
    timed = {name for name, _ in job.duration_by_type_s}
    present = {
        n.gpu_type
        for n in instance.nodes
        if n.healthy_indices
        and n.gpu_type in (job.gpu_types or instance.gpu_types)
        and (job.duration_s is not None or n.gpu_type in timed)
    }
    roomy = {t for t in present if instance.gpu_types[t].memory_gb >= job.min_gpu_memory_gb}
    fails = reason.facts["fails"]
    assert fails == ["type" if not present else "memory" if not roomy else "topology"]


def _check_draining(instance: Instance, decision: Decision, job: QueuedJob, reason: Reason) -> None:
    nodes = [instance.nodes[instance.node_index[n]] for n in reason.facts["nodes"]]
    if "could_start_s" in reason.facts:  # a placement that uses draining nodes
        assert any(n.draining for n in nodes)
        assert reason.facts["could_start_s"] < _start(decision, job.id)
        return
    # every node that could hold it is draining: with them open it fits the empty cluster
    assert nodes and all(n.draining for n in nodes)
    empty = {"running": (), "tenants": _no_quota(instance, job.tenant)}
    assert _alone(instance, job, **empty).action is Action.DEFERRED
    assert _alone(_undrained(instance), job, **empty).action is Action.START


def _check_quota(instance: Instance, decision: Decision, job: QueuedJob, reason: Reason) -> None:
    quota = tenant_quota(instance, job.tenant)
    facts = reason.facts
    assert quota is not None and facts["tenant"] == job.tenant and facts["quota"] == quota
    in_use = _tenant_use(instance, decision, job, 0)
    assert math.isclose(facts["in_use"], in_use)
    if "peak_in_use" not in facts:
        assert in_use + job.gpu_amount > quota + 1e-9  # "quota reached" now
        return
    # It could start sooner, but over that run its tenant would pass the quota.
    start, end = facts["could_start_s"], facts["could_end_s"]
    assert start < _start(decision, job.id) and end > start
    # Use changes only where a job starts or ends: look there.
    marks = {r.remaining_s for r in instance.running}
    marks |= {t for item in decision.jobs for t in (item.start_s, item.end_s) if t is not None}
    times = {start} | {t for t in marks if start < t < end}
    peak = max(_tenant_use(instance, decision, job, t) for t in times)
    assert math.isclose(facts["peak_in_use"], peak)
    assert peak + job.gpu_amount > quota + 1e-9


def _check_busy(
    instance: Instance, position: int, decision: Decision, eligible: set[str], reason: Reason
) -> None:
    job = instance.queue[position]
    kept = _kept(instance, decision)
    running = {r.id: r for r in kept}  # a job the round preempts holds nothing
    for holder in reason.facts["holders"]:
        assert holder["job"] in running
        held = running[holder["job"]]
        assert set(holder["nodes"]) <= _gpu_nodes(held) & eligible
        assert holder["nodes"] and holder["gpus"] == len(held.gpu_ids)
        assert holder["ends_s"] == held.remaining_s
    # With only the running jobs kept (no quota, no preemption) it still cannot start now.
    alone = _alone(
        instance,
        job,
        running=kept,
        tenants=_no_quota(instance, job.tenant),
        policy=replace(instance.policy, allow_preemption=False),
    )
    assert alone.action is not Action.START
    until = reason.facts["until_s"]
    # Not bounded by its planned start: a plan counts GPUs, and an NVLink job may be
    # planned at the end of any job on a partly linked node (the release rule).
    assert until is None or until > 0


def _check_scattered(
    instance: Instance, decision: Decision, eligible: set[str], reason: Reason
) -> None:
    free = reason.facts["free"]
    assert set(free) <= eligible
    assert all(count == _free_now(instance, decision, node) for node, count in free.items())
    assert sum(free.values()) >= reason.facts["gpus"]


def _check_outranked(
    instance: Instance, position: int, decision: Decision, eligible: set[str], reason: Reason
) -> None:
    job = instance.queue[position]
    mine = _start(decision, job.id)
    quota = tenant_quota(instance, job.tenant)
    for rival in reason.facts["by"]:
        other = instance.queue[instance.queue_position(rival["job"])]
        item = decision.job(other.id)
        assert other.id != job.id and item.action in (Action.START, Action.PLANNED)
        assert item.start_s == rival["start_s"] and item.start_s <= mine
        assert list(job_nodes(item)) == rival["nodes"]
        assert rival["rank"] == class_rank(instance, other)
        assert set(rival["nodes"]) & eligible or (other.tenant == job.tenant and quota)


def _check_ceiling(instance: Instance, position: int, decision: Decision, reason: Reason) -> None:
    job = instance.queue[position]
    facts = reason.facts
    if facts["overdue"]:
        ceiling = instance.max_wait(job)
        assert instance.overdue[position] and ceiling is not None
        assert facts["waited_s"] == waited_s(job) > ceiling == facts["max_wait_s"]
        assert facts["expected_start_s"] == decision.job(job.id).start_s
        for other in facts["ahead"]:
            assert instance.overdue[instance.queue_position(other)]
            assert decision.job(other).action is not Action.START
        return
    for rival in facts["by"]:
        assert instance.overdue[instance.queue_position(rival["job"])]
        assert rival["start_s"] == decision.job(rival["job"]).start_s <= _start(decision, job.id)


def _check_faster_later(
    instance: Instance, decision: Decision, job: QueuedJob, reason: Reason
) -> None:
    item = decision.job(job.id)
    facts = reason.facts
    assert facts["could_start_s"] < _start(decision, job.id)
    if item.action is Action.DEFERRED:  # priced as ending at the horizon + shortest duration
        shortest = min(instance.durations[instance.queue_position(job.id)].values())
        assert facts["planned_end_s"] == instance.policy.horizon_s + shortest
    else:
        assert facts["planned_end_s"] == item.end_s
    assert facts["planned_end_s"] <= facts["could_end_s"]  # "waiting ... ends sooner"


def _check_price(instance: Instance, decision: Decision, job: QueuedJob, reason: Reason) -> None:
    facts = reason.facts
    assert facts["could_start_s"] < _start(decision, job.id)
    assert instance.policy.gpu_second_price(facts["gpu_type"]) > 0
    assert facts["price_now"] > facts["price_planned"]
    assert facts["cost_planned"] <= facts["cost_now"]


def _check_preference(
    instance: Instance, decision: Decision, job: QueuedJob, reason: Reason
) -> None:
    facts = reason.facts
    by_id = {n.id: n for n in instance.nodes}
    if "would_drop" in facts:  # a sooner placement drops preferences the plan keeps
        assert facts["would_drop"]
        assert all(getattr(job, PREFERENCES[p]) for p in facts["would_drop"])
        assert facts["could_start_s"] < _start(decision, job.id)
        nodes = [by_id[n] for n in facts["nodes"]]
        if "zone" in facts["would_drop"]:
            assert any(n.zone != job.zone for n in nodes)
        if "gpu_type" in facts["would_drop"]:
            assert nodes[0].gpu_type not in job.preferred_gpu_types
        return
    if "dropped" in facts:
        assert facts["dropped"] and all(getattr(job, PREFERENCES[p]) for p in facts["dropped"])
        if "zone" in facts["dropped"]:
            assert all(by_id[n].zone != job.zone for n in facts["nodes"])
        return
    assert job.zone is not None and facts["zone"] == job.zone
    assert all(by_id[n].zone != job.zone for n in facts["nodes"])
    start = decision.job(job.id).start_s
    assert facts["could_start_s"] < (instance.policy.horizon_s if start is None else start)


def _check_guarantee(
    instance: Instance, decision: Decision, job: QueuedJob, reason: Reason
) -> None:
    facts = reason.facts
    kept = _kept(instance, decision)
    held = sum(len(r.gpu_ids) for r in kept if r.tenant == job.tenant)
    assert facts["held"] == held < tenant_guarantee(instance, job.tenant) == facts["guaranteed"]
    assert facts["borrowers"] and set(facts["borrowers"]) <= {r.id for r in kept}


def _check_reason(instance: Instance, decision: Decision, position: int, reason: Reason) -> None:
    job = instance.queue[position]
    eligible = {instance.nodes[k].id for k in ClusterState(instance).eligible(position)}
    kind = reason.kind
    assert kind in REASON_KINDS and reason.message
    json.dumps(reason.facts)  # what `whale-opt explain --json` prints
    if kind == "no-hardware":
        _check_no_hardware(instance, job, reason)
    elif kind == "draining":
        _check_draining(instance, decision, job, reason)
    elif kind == "quota":
        _check_quota(instance, decision, job, reason)
    elif kind == "busy":
        _check_busy(instance, position, decision, eligible, reason)
    elif kind == "scattered":
        _check_scattered(instance, decision, eligible, reason)
    elif kind == "share":
        assert job.shares and reason.facts["gpu_milli"] == job.gpu_milli
    elif kind == "outranked":
        _check_outranked(instance, position, decision, eligible, reason)
    elif kind == "ceiling":
        _check_ceiling(instance, position, decision, reason)
    elif kind == "faster-later":
        _check_faster_later(instance, decision, job, reason)
    elif kind == "preference":
        _check_preference(instance, decision, job, reason)
    elif kind == "price":
        _check_price(instance, decision, job, reason)
    elif kind == "guarantee":
        _check_guarantee(instance, decision, job, reason)


# -- counterfactuals, applied by their meaning ------------------------------------------


def _carried(instance: Instance, decision: Decision, job_id: str) -> tuple[RunningJob, ...]:
    """The round's other starts as running jobs (the meaning of a ``wait``'s ``jobs``)."""
    out = []
    for job in instance.queue:
        item = decision.job(job.id)
        if job.id == job_id or item.action is not Action.START:
            continue
        out.append(
            RunningJob(
                job.id,
                item.gpu_ids,
                item.end_s or 1,
                tenant=job.tenant,
                cpu=job.cpu,
                memory_gb=job.memory_gb,
                weight=job.weight,
                preemptible=job.preemptible,
                priority_class=job.priority_class,
                gpu_milli=job.gpu_milli,
                node=item.cpu_only_node,
            )
        )
    return tuple(out)


def _requeued(instance: Instance, decision: Decision, change: Change) -> tuple[QueuedJob, ...]:
    """The preempted running jobs a ``wait`` requeues: exactly the decision's, each as
    large as it ran (how much work it has left is the change's modelling choice)."""
    requeued = tuple(job for job in change.jobs if isinstance(job, QueuedJob))
    preempted = {item.id for item in decision.by_action(Action.PREEMPT)}
    assert {job.id for job in requeued} == preempted
    running = {r.id: r for r in instance.running}
    for job in requeued:
        was = running[job.id]
        assert (job.tenant, job.gpu_count, job.gpu_milli, job.priority_class) == (
            was.tenant,
            len(was.gpu_ids),
            was.gpu_milli,
            was.priority_class,
        )
    return requeued


def _waited(
    instance: Instance,
    seconds: int,
    carried: tuple[RunningJob, ...],
    requeued: tuple[QueuedJob, ...],
) -> Instance:
    """``seconds`` later: running and carried jobs age (those done leave), preempted
    ones wait in the queue, the rest waits."""
    preempted = {job.id for job in requeued}
    running = tuple(
        replace(
            r,
            remaining_s=r.remaining_s - seconds,
            started_at=r.started_at - seconds,
            since_checkpoint_s=None
            if r.since_checkpoint_s is None
            else r.since_checkpoint_s + seconds,
        )
        for r in (*instance.running, *carried)
        if r.remaining_s > seconds and r.id not in preempted
    )
    gone = {r.id for r in carried}
    queue = tuple(
        replace(q, submitted_at=q.submitted_at - seconds)
        for q in (*instance.queue, *requeued)
        if q.id not in gone
    )
    return instance.replace(running=running, queue=queue, now=instance.now + seconds)


def _changed(instance: Instance, decision: Decision, job_id: str, change: Change) -> Instance:
    """``instance`` with ``change`` made as its kind says (not by the explain code)."""
    position = instance.queue_position(job_id)
    queue = list(instance.queue)
    if change.kind == "gpu-types":
        assert change.target == job_id
        queue[position] = replace(queue[position], gpu_types=tuple(change.value))
        return instance.replace(queue=tuple(queue))
    if change.kind == "topology":
        assert change.target == job_id
        queue[position] = replace(queue[position], topology=change.value)
        return instance.replace(queue=tuple(queue))
    if change.kind == "quota":
        assert change.target == instance.queue[position].tenant
        old = instance.tenants[change.target]
        assert old.gpu_quota is not None and change.value > old.gpu_quota
        tenants = {**instance.tenants, change.target: Tenant(change.target, int(change.value))}
        return instance.replace(tenants=tenants)
    if change.kind == "preempt":
        gone = set(change.value)
        assert gone <= {r.id for r in instance.running if r.preemptible}
        return instance.replace(running=tuple(r for r in instance.running if r.id not in gone))
    assert change.kind == "wait" and change.target == job_id
    assert change.value == decision.job(job_id).start_s
    carried = _carried(instance, decision, job_id)
    assert {r.id for r in change.jobs if isinstance(r, RunningJob)} == {r.id for r in carried}
    requeued = _requeued(instance, decision, change)
    return _waited(instance, int(change.value), carried, requeued)


def _check_counterfactuals(
    instance: Instance, decision: Decision, found: Explanation, policy: str
) -> None:
    for cf in found.counterfactuals:
        assert cf.start_now == cf.verified
        changed = _changed(instance, decision, found.job_id, cf.instance_change)
        after = solve(changed, policy, OPTIONS[policy])
        action = after.job(found.job_id).action
        assert action.value == cf.decision_action, cf.change
        assert (action is Action.START) == cf.verified, cf.change
        if cf.verified:
            assert check(changed, after) == [], cf.change
    verified = [cf.verified for cf in found.counterfactuals]
    assert verified == sorted(verified, reverse=True)  # those that work first


# -- the property ----------------------------------------------------------------------


def _explained(instance: Instance, policy: str) -> None:
    decision = solve(instance, policy, OPTIONS[policy])
    assert check(instance, decision) == []
    waiting = [q.id for q in instance.queue if decision.job(q.id).action is not Action.START]
    found = explain(instance, solver=policy, options=OPTIONS[policy])
    assert sorted(e.job_id for e in found) == sorted(waiting)
    for e in found:
        item = decision.job(e.job_id)
        assert (e.action, e.start_s) == (item.action, item.start_s)
        assert e.reasons, f"{e.job_id} waits with no reason"
        position = instance.queue_position(e.job_id)
        for reason in e.reasons:
            _check_reason(instance, decision, position, reason)
        _check_counterfactuals(instance, decision, e, policy)
        json.dumps(e.to_dict())
        assert e.render().startswith(e.job_id)


@settings(max_examples=50, deadline=None)
@given(rounds())
def test_every_waiting_job_is_explained_truthfully(instance: Instance) -> None:
    for policy in OPTIONS:
        try:
            _explained(instance, policy)
        except AssertionError as error:
            raise AssertionError(f"policy {policy}: {error}") from error
