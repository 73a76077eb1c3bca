"""What if the cluster, the queue or a quota changed? Re-solve and compare.

A :class:`Change` is one edit of an :class:`~whale_opt.problem_data.Instance`
(:func:`apply_change` builds the edited instance, validated again);
:func:`whatif` solves the instance before and after the change with the same
solver and returns a :class:`Diff`: per job what changed (action, start, end,
GPUs or nodes), the objective before and after, and the moved starts.

Modelling choices:

- **fail-node**: the node goes down; the running jobs on it are lost, as
  the engine reports them (:func:`~whale_opt.problem_data.hardware_failure`),
  and come back to the queue as a preempted job does (:func:`interrupted`):
  their remaining work, plus the work since their last checkpoint, plus
  their ``checkpoint_s`` to restore (GPU type, weight and priority class
  kept; ``node`` topology on one node, ``rack`` across one rack's nodes,
  ``any`` beyond). The :class:`Diff` names them (``lost``).
- **add-jobs**: the jobs join the queue; an error names the bad job by its
  index among the added ones (``[k].id``), not by its place in the merged
  queue.
- **drain**: the node is marked ``draining``: running jobs keep running,
  and it takes no new work, now or later.
- **wait**: ``now`` moves forward by ``value`` seconds: running jobs (and
  ``jobs``, the round's started jobs as running ones) age, with no
  checkpoint meanwhile, those done leave, and every queued job stays queued
  (and ages, where the policy ages weights). A queued job in ``jobs`` is a
  running job the round preempted, as it goes back to the queue: it leaves
  the cluster and waits with the others.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from whale_opt.decision import Action, Decision, JobDecision, job_nodes
from whale_opt.io import InputError, load_json, read_queue
from whale_opt.io.files import build_in_file
from whale_opt.options import SolveOptions
from whale_opt.problem_data import (
    FieldError,
    Instance,
    Node,
    QueuedJob,
    RunningJob,
    Tenant,
    hardware_failure,
)
from whale_opt.solve import solve

CHANGE_KINDS = (
    "add-jobs",
    "fail-node",
    "drain",
    "quota",
    "gpu-types",
    "topology",
    "preempt",
    "wait",
)


@dataclass(frozen=True)
class Change:
    """One edit of an instance.

    ``target`` is a node id (fail-node, drain), a tenant (quota) or a queued
    job id (gpu-types, topology, wait); ``value`` the new quota, GPU types,
    topology, preempted running job ids or seconds to wait; ``jobs`` the
    queued jobs to add (add-jobs) or started jobs to carry as running (wait; a
    queued job there is a preempted running job of the same id, requeued).
    """

    kind: str
    target: str = ""
    value: Any = None
    jobs: tuple[Any, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.kind not in CHANGE_KINDS:
            raise ValueError(f"unknown change {self.kind!r}; choose from {CHANGE_KINDS}")

    def describe(self) -> str:
        """The change in words."""
        if self.kind == "add-jobs":
            return "add job(s) " + ", ".join(job.id for job in self.jobs)
        if self.kind == "fail-node":
            return f"node {self.target} fails"
        if self.kind == "drain":
            return f"drain node {self.target} (no new work)"
        if self.kind == "quota":
            return f"set tenant {self.target} quota to {self.value} GPUs"
        if self.kind == "gpu-types":
            return f"let {self.target} accept GPU types {', '.join(self.value)}"
        if self.kind == "topology":
            return f"relax {self.target} topology to {self.value}"
        if self.kind == "preempt":
            return "preempt " + ", ".join(self.value)
        return f"wait {self.value} s"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        out: dict[str, Any] = {"kind": self.kind, "target": self.target, "value": value}
        if self.kind == "add-jobs":
            out["jobs"] = [job.id for job in self.jobs]
        return out


def _node_pos(instance: Instance, node_id: str) -> int:
    if node_id not in instance.node_index:
        raise FieldError("node", node_id, "names no node of the instance")
    return instance.node_index[node_id]


def requeued(instance: Instance, job: RunningJob, work_s: int) -> QueuedJob:
    """Running job ``job`` back in the queue with ``work_s`` seconds of work left on
    the GPU type it held: its GPU count and share, in the shape it ran in
    (:meth:`~whale_opt.problem_data.Instance.held_topology`). A CPU-only job may
    run on any node, as long there; a GPU job's work
    is counted on speed-1.0 GPUs."""
    nodes = instance.held_nodes(job)
    node = instance.nodes[nodes[0]]
    speed = instance.gpu_types[node.gpu_type].speed if job.gpu_ids else 1.0
    return QueuedJob(
        job.id,
        len(job.gpu_ids),
        max(1, math.ceil(work_s * speed)),
        tenant=job.tenant,
        gpu_types=(node.gpu_type,) if job.gpu_ids else (),
        cpu=job.cpu,
        memory_gb=job.memory_gb,
        weight=job.weight,
        topology=instance.held_topology(job),
        priority_class=job.priority_class,
        gpu_milli=job.gpu_milli,
    )


def interrupted(instance: Instance, job: RunningJob) -> QueuedJob:
    """Running job ``job`` back in the queue after a preemption or a failure, as
    the scheduler requeues it and the objective prices it
    (:func:`whale_opt.decision.preemption_cost`): its remaining work, plus the
    work since its last checkpoint, plus its ``checkpoint_s`` to restore."""
    return requeued(instance, job, job.remaining_s + job.lost_on_preempt_s + job.checkpoint_s)


def lost_jobs(instance: Instance, change: Change) -> dict[str, str]:
    """The running jobs ``change`` makes lost, each with what failed ("node a01 is
    down"); empty unless it fails a node."""
    if change.kind != "fail-node":
        return {}
    return _lost_on(instance, _failed_nodes(instance, change.target))


def _lost_on(instance: Instance, nodes: tuple[Node, ...]) -> dict[str, str]:
    """The running jobs of ``instance`` on failed hardware among ``nodes``, each with
    what failed."""
    by_id = {node.id: node for node in nodes}
    out = {}
    for job in instance.running:
        reason = hardware_failure(by_id, job.gpu_ids, job.node)
        if reason is not None:
            out[job.id] = reason
    return out


def _failed_nodes(instance: Instance, node_id: str) -> tuple[Node, ...]:
    pos = _node_pos(instance, node_id)
    nodes = list(instance.nodes)
    nodes[pos] = replace(instance.nodes[pos], down=True)
    return tuple(nodes)


def _fail_node(instance: Instance, node_id: str) -> Instance:
    nodes = _failed_nodes(instance, node_id)
    lost = _lost_on(instance, nodes)
    return instance.replace(
        nodes=nodes,
        running=tuple(job for job in instance.running if job.id not in lost),
        queue=instance.queue
        + tuple(interrupted(instance, job) for job in instance.running if job.id in lost),
    )


def add_jobs(instance: Instance, jobs: Iterable[QueuedJob]) -> Instance:
    """``instance`` with ``jobs`` at the end of its queue.

    Raises FieldError located among ``jobs`` (``[k].id``: a duplicate id,
    ``[k].gpu_types[0]``: a type the cluster lacks), not in the merged queue.
    """
    jobs = tuple(jobs)
    try:
        return instance.replace(queue=instance.queue + jobs)
    except FieldError as exc:
        match = re.match(r"queue\[(\d+)\]", exc.path)
        if match is None or int(match[1]) < len(instance.queue):
            raise
        k = int(match[1]) - len(instance.queue)
        raise FieldError(f"[{k}]{exc.path[match.end() :]}", exc.value, exc.message) from None


def _drain(instance: Instance, node_id: str) -> Instance:
    pos = _node_pos(instance, node_id)
    nodes = list(instance.nodes)
    nodes[pos] = replace(nodes[pos], draining=True)
    return instance.replace(nodes=tuple(nodes))


def _edit_job(instance: Instance, job_id: str, **changes: Any) -> Instance:
    pos = instance.queue_position(job_id)
    queue = list(instance.queue)
    queue[pos] = replace(queue[pos], **changes)
    return instance.replace(queue=tuple(queue))


def _wait(instance: Instance, seconds: int, jobs: Iterable[RunningJob | QueuedJob]) -> Instance:
    jobs = tuple(jobs)
    carried = tuple(job for job in jobs if isinstance(job, RunningJob))
    requeued = tuple(job for job in jobs if isinstance(job, QueuedJob))
    preempted = {job.id for job in requeued}
    running = []
    for job in (*instance.running, *carried):
        if job.id in preempted:
            continue
        if job.remaining_s > seconds:
            since = job.since_checkpoint_s
            running.append(
                replace(
                    job,
                    remaining_s=job.remaining_s - seconds,
                    started_at=job.started_at - seconds,
                    since_checkpoint_s=None if since is None else since + seconds,
                )
            )
    carried_ids = {job.id for job in carried}
    queue = tuple(
        replace(job, submitted_at=job.submitted_at - seconds)
        for job in (*instance.queue, *requeued)
        if job.id not in carried_ids
    )
    return instance.replace(running=tuple(running), queue=queue, now=instance.now + seconds)


def apply_change(instance: Instance, change: Change) -> Instance:
    """``instance`` with ``change`` applied (raises FieldError/KeyError on bad names)."""
    if change.kind == "add-jobs":
        return add_jobs(instance, change.jobs)
    if change.kind == "fail-node":
        return _fail_node(instance, change.target)
    if change.kind == "drain":
        return _drain(instance, change.target)
    if change.kind == "quota":
        tenants = dict(instance.tenants)
        tenants[change.target] = Tenant(change.target, _whole(change.value, "GPUs"))
        return instance.replace(tenants=tenants)
    if change.kind == "gpu-types":
        return _edit_job(instance, change.target, gpu_types=tuple(change.value))
    if change.kind == "topology":
        return _edit_job(instance, change.target, topology=change.value)
    if change.kind == "preempt":
        for k, job_id in enumerate(change.value):
            if job_id not in instance.running_index:
                raise FieldError(f"value[{k}]", job_id, "names no running job of the instance")
        gone = set(change.value)
        return instance.replace(running=tuple(j for j in instance.running if j.id not in gone))
    return _wait(instance, _whole(change.value, "seconds"), change.jobs)


def _whole(value: Any, unit: str) -> int:
    """``value``, a whole number >= 0 (of ``unit``), or a FieldError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FieldError("value", value, f"must be a whole number of {unit} >= 0")
    text = str(value).strip()
    if not text.isdigit():
        raise FieldError("value", value, f"must be a whole number of {unit} >= 0")
    return int(text)


def read_jobs(path: str | Path, into: Instance | None = None) -> tuple[QueuedJob, ...]:
    """Queued jobs to add, from a JSON file (see :func:`whale_opt.io.read_queue`).

    With ``into``, also checks that they can join its queue (:func:`add_jobs`).
    Raises InputError naming ``path`` and the job's place in it (``queue[k]``,
    as the file's own format errors say).
    """
    try:
        jobs = read_queue(path)
    except InputError as exc:
        raw = load_json(path) if exc.path == "queue" else None
        if isinstance(raw, dict) and "queue" not in raw:
            raise InputError(
                str(path),
                "(top level)",
                "is one JSON object: expected a list of queue items, [{...}, ...],"
                ' or {"queue": [...]} (wrap a single job in [ ])',
            ) from None
        raise
    if into is not None:
        build_in_file(str(path), "queue", add_jobs, into, jobs)
    return jobs


@dataclass(frozen=True)
class JobChange:
    """One job decided differently: its decision before and after (None: absent);
    ``lost``: what failed under it when the change made it lost (it was then
    requeued, and ``after`` is its requeued run)."""

    job_id: str
    before: JobDecision | None
    after: JobDecision | None
    lost: str | None = None

    @property
    def start_moved(self) -> bool:
        """Whether the expected start changed."""
        return _start(self.before) != _start(self.after)


@dataclass(frozen=True)
class Diff:
    """Decisions before and after a change, and what differs."""

    change: Change
    before: Decision
    after: Decision
    jobs: tuple[JobChange, ...]

    @property
    def objective_delta(self) -> float:
        """Objective after minus before."""
        return self.after.objective - self.before.objective

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "change": self.change.to_dict(),
            "objective_before": self.before.objective,
            "objective_after": self.after.objective,
            "objective_delta": self.objective_delta,
            "jobs": [
                {
                    "id": item.job_id,
                    "before": _summary(item.before),
                    "after": _summary(item.after),
                    "lost": item.lost,
                    "start_moved": item.start_moved,
                }
                for item in self.jobs
            ],
        }

    def render(self) -> str:
        """A readable report."""
        lines = [f"what if: {self.change.describe()}"]
        lines.append(f"{'job':<14} {'before':<28} {'after':<28}")
        for item in self.jobs:
            after = _short(item.after)
            if item.lost is not None:
                after = f"lost ({item.lost}), requeued: {after}"
            lines.append(f"{item.job_id:<14} {_short(item.before):<28} {after:<28}")
        if not self.jobs:
            lines.append("(no decision changes)")
        lines.append(
            f"objective {self.before.objective:.6g} -> {self.after.objective:.6g}"
            f" ({self.objective_delta:+.6g})"
        )
        return "\n".join(lines)


def _start(item: JobDecision | None) -> int | None:
    return None if item is None else item.start_s


def _summary(item: JobDecision | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {
        "action": item.action.value,
        "start_s": item.start_s,
        "end_s": item.end_s,
        "gpus": list(item.gpu_ids),
        "nodes": list(job_nodes(item)),
        "reason": item.reason,
    }


def _short(item: JobDecision | None) -> str:
    if item is None:
        return "-"
    if item.action in (Action.START, Action.PLANNED):
        return f"{item.action.value} {item.start_s}-{item.end_s} {','.join(job_nodes(item))}"
    return item.action.value


def _same(a: JobDecision | None, b: JobDecision | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.action, a.start_s, a.end_s, a.gpu_ids, job_nodes(a)) == (
        b.action,
        b.start_s,
        b.end_s,
        b.gpu_ids,
        job_nodes(b),
    )


def diff(
    change: Change, before: Decision, after: Decision, lost: dict[str, str] | None = None
) -> Diff:
    """The jobs decided differently in ``before`` and ``after``; ``lost``: the jobs
    the change made lost, with what failed (see :func:`lost_jobs`)."""
    lost = lost or {}
    old = {item.id: item for item in before.jobs}
    new = {item.id: item for item in after.jobs}
    jobs = tuple(
        JobChange(job_id, old.get(job_id), new.get(job_id), lost.get(job_id))
        for job_id in dict.fromkeys([*old, *new])
        if job_id in lost or not _same(old.get(job_id), new.get(job_id))
    )
    return Diff(change, before, after, jobs)


def whatif(
    instance: Instance,
    change: Change,
    solver: str = "wspt",
    options: SolveOptions | None = None,
) -> Diff:
    """Solve ``instance`` before and after ``change`` with ``solver`` (and ``options``)
    and compare."""
    changed = apply_change(instance, change)  # bad names fail before any solve
    before = solve(instance, solver, options)
    after = solve(changed, solver, options)
    return diff(change, before, after, lost_jobs(instance, change))


def dumps(diff_: Diff) -> str:
    """The diff as indented JSON."""
    return json.dumps(diff_.to_dict(), indent=1)
