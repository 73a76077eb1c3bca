"""What Slurm reports -> one whale_opt :class:`Instance` (pure, no Slurm calls).

The mapping (docs/SLURM.md has the user's version):

- a node with GPUs -> :class:`Node` (GPU type from its GRES type, or, in the
  indexed layout where the GRES types are ``g0``..``g7``, from a node feature
  that names a known GPU type; ``gpu`` otherwise); down / not responding ->
  ``down``, drain / fail / maintenance -> ``draining``;
- a job holding GPUs (running, completing...) -> :class:`RunningJob` on the
  GPU indices of its ``gres_detail``; a job already released to a node list
  but not started yet (``in flight``) holds its GPUs too, so that nothing is
  placed twice while Slurm starts it;
- a held pending job (priority 0, as ``job_submit.lua`` leaves it) ->
  :class:`QueuedJob`: GPUs per node x nodes, its time limit as the duration
  estimate, its account (or user) as tenant, its QOS as priority class when
  one of that name exists (or ``--comment=class=NAME``). A multi-node job
  must take whole nodes.

Times in the instance count from ``now`` (Unix seconds), which is 0.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from whale_opt.problem_data import (
    DEFAULT_CLASS,
    DEFAULT_PRIORITY_CLASSES,
    Instance,
    Node,
    Policy,
    QueuedJob,
    RunningJob,
)
from whale_opt.slurm import gres
from whale_opt.slurm.nodes import build_nodes, gpu_types
from whale_opt.slurm.options import BridgeOptions
from whale_opt.slurm.records import SlurmJob, SlurmNode, parse_jobs, parse_nodes

log = logging.getLogger("whale_opt")

CLASS_KEY = "class"  # sbatch --comment=class=online picks a priority class
# Pending reasons of a released job that Slurm will never start as it stands.
NEVER_STARTS = frozenset({"BadConstraints", "PartitionConfig", "InvalidQOS", "InvalidAccount"})
HOLDING_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED"})


@dataclass(frozen=True)
class Snapshot:
    """One read of Slurm: the instance to solve and what the commands need.

    ``jobs``: the Slurm record of every job in the instance (queued, running
    and in flight); ``in_flight``: released jobs not started yet;
    ``skipped``: (job id, why) for held jobs whale_opt does not place.
    """

    instance: Instance
    now: int
    jobs: Mapping[str, SlurmJob]
    nodes: Mapping[str, SlurmNode]
    in_flight: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()


def _duration(job: SlurmJob, options: BridgeOptions) -> int:
    return job.time_limit_s if job.time_limit_s else options.default_duration_s


def _class_of(job: SlurmJob) -> str:
    """The job's priority class: its QOS when a class has that name, else a
    ``class=NAME`` word in its comment (QOS needs slurmdbd), else the default."""
    if job.qos in DEFAULT_PRIORITY_CLASSES:
        return job.qos
    for word in job.comment.replace(",", " ").split():
        key, _, value = word.partition("=")
        if key == CLASS_KEY and value in DEFAULT_PRIORITY_CLASSES:
            return value
    return DEFAULT_CLASS


class _Builder:
    """Accumulates the instance's parts, GPU owners and skip reasons."""

    def __init__(self, nodes: dict[str, Node], options: BridgeOptions, now: int) -> None:
        self.nodes = nodes
        self.options = options
        self.now = now
        self.owner: dict[str, str] = {}
        self.running: list[RunningJob] = []
        self.queue: list[QueuedJob] = []
        self.jobs: dict[str, SlurmJob] = {}
        self.in_flight: list[str] = []
        self.skipped: list[tuple[str, str]] = []
        self.other_cpu: dict[str, float] = {}

    def _usable(self, node_id: str) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and not node.down

    def hold(self, job: SlurmJob) -> None:
        """A job holding GPUs now (``gres_detail``); a GPU-less one only takes CPUs."""
        if not any(job.held_gpus):
            for node_id in job.nodes:
                share = job.cpus / max(len(job.nodes), 1)
                self.other_cpu[node_id] = self.other_cpu.get(node_id, 0.0) + share
            return
        if not all(self._usable(node_id) for node_id in job.nodes):
            log.info("slurm: job %s runs on nodes outside the model (%s)", job.id, job.nodes)
            return
        gpus = tuple(
            f"{node_id}/{index}"
            for node_id, indices in zip(job.nodes, job.held_gpus, strict=False)
            for index in indices
            if index < self.nodes[node_id].gpu_count
        )
        elapsed = max(0, self.now - job.start_time) if job.start_time else 0
        remaining = _duration(job, self.options) - elapsed
        preemptible = self.options.allow_preemption and job.requeue and job.state == "RUNNING"
        self._add_running(job, gpus, max(1, remaining), -elapsed, preemptible)

    def _add_running(
        self, job: SlurmJob, gpus: tuple[str, ...], remaining: int, started: int, preempt: bool
    ) -> None:
        clash = [gpu for gpu in gpus if gpu in self.owner]
        if clash or not gpus:
            log.warning("slurm: job %s left out: GPUs %s already held", job.id, clash)
            return
        for gpu in gpus:
            self.owner[gpu] = job.id
        self.running.append(
            RunningJob(
                id=job.id,
                gpu_ids=gpus,
                remaining_s=remaining,
                tenant=job.tenant,
                cpu=float(job.cpus),
                started_at=started,
                preemptible=preempt,
                priority_class=_class_of(job),
            )
        )
        self.jobs[job.id] = job

    def in_flight_job(self, job: SlurmJob) -> None:
        """Released to a node list, not started yet: it will take its GPUs.

        Its GPUs still held by others are left out (Slurm starts it when they
        free up); in the plain layout Slurm picks, so the lowest free indices
        stand in for them.
        """
        per_node = job.gpus_per_node
        if per_node == 0 or not all(self._usable(n) for n in job.required_nodes):
            return
        if job.reason in NEVER_STARTS:
            log.warning(
                "slurm: job %s was released to %s but Slurm cannot start it (%s);"
                " its GPUs are not counted as taken",
                job.id,
                ",".join(job.required_nodes),
                job.reason,
            )
            return
        wanted = gres.requested_indices(job.request)
        gpus: list[str] = []
        for node_id in job.required_nodes:
            node = self.nodes[node_id]
            free = [k for k in node.healthy_indices if f"{node_id}/{k}" not in self.owner]
            if wanted is not None and self.options.gres_mode == "indexed":
                indices = [k for k in wanted if k in free]
            else:
                indices = free[:per_node]
            gpus.extend(f"{node_id}/{k}" for k in indices)
        log.debug(
            "slurm: job %s released to %s, not started yet (%s)",
            job.id,
            ",".join(job.required_nodes),
            job.reason,
        )
        if gpus:
            self._add_running(job, tuple(gpus), _duration(job, self.options), 0, False)
            self.in_flight.append(job.id)

    def queued(self, job: SlurmJob) -> None:
        """A held job: queue it, or say why it is left held."""
        why = self._unplaceable(job)
        if why is not None:
            self.skipped.append((job.id, why))
            return
        per_node = job.gpus_per_node
        gpu_types = self._requested_types(job)
        if isinstance(gpu_types, str):
            self.skipped.append((job.id, gpu_types))
            return
        self.queue.append(
            QueuedJob(
                id=job.id,
                gpu_count=per_node * job.node_count,
                duration_s=_duration(job, self.options),
                tenant=job.tenant,
                gpu_types=gpu_types,
                cpu=float(job.cpus),
                submitted_at=min(0, job.submit_time - self.now),
                topology="node" if job.node_count == 1 else "nvlink",
                preemptible=job.requeue,
                priority_class=_class_of(job),
            )
        )
        self.jobs[job.id] = job

    @staticmethod
    def _unplaceable(job: SlurmJob) -> str | None:
        if job.array_pending:
            return "a job array: release its tasks yourself (whale-opt places single jobs)"
        if job.dependency:
            return f"waits on its dependency ({job.dependency})"
        if job.gpus_per_node == 0:
            if job.per_job_gpus:
                return "asks GPUs per job (--gpus); ask per node (--gres=gpu:N)"
            return "asks for no GPUs"
        return None

    def _requested_types(self, job: SlurmJob) -> tuple[str, ...] | str:
        """The GPU types ``job`` may use (() = any), or why it cannot be placed."""
        present = {node.gpu_type for node in self.nodes.values()}
        types = {e.type for e in gres.gpus(job.request) if e.count and e.type is not None}
        types = {t for t in types if gres.type_index(t) is None}
        if self.options.gres_mode == "indexed":
            # GRES types name indices there, so a model is a node feature. A typed
            # request cannot be rewritten to indices: Slurm keeps the old type
            # (at count 0) and then finds no node with it (BadConstraints).
            if types:
                model = sorted(types)[0]
                return f"asks gpu:{model}:N; with indexed GRES ask --gres=gpu:N -C {model}"
            types = {f for f in job.features.split("&") if f in present}
        if len(types) > 1:
            return f"asks for several GPU types {sorted(types)} at once"
        missing = types - present
        if missing:
            return f"asks for GPU type {missing.pop()}, which no node offers"
        if job.node_count == 1:
            return tuple(types)
        # A multi-node job takes whole nodes: only types whose nodes all have
        # exactly the GPUs it asks per node (whale_opt then gives whole nodes).
        whole = {
            name
            for name in types or present
            if all(
                n.gpu_count == job.gpus_per_node for n in self.nodes.values() if n.gpu_type == name
            )
        }
        if not whole:
            return (
                f"multi-node job must take whole nodes: --gres=gpu:{job.gpus_per_node} per node"
                " matches no node type's GPU count"
            )
        return tuple(sorted(whole))

    def cpu_capacity(self) -> tuple[Node, ...]:
        """The nodes, less the CPUs that jobs outside the model (no GPUs) hold."""
        return tuple(
            replace(node, cpu=max(0.0, node.cpu - self.other_cpu.get(node_id, 0.0)))
            for node_id, node in self.nodes.items()
        )


def build_snapshot(
    squeue: Mapping[str, Any],
    sinfo: Mapping[str, Any],
    now: int,
    options: BridgeOptions | None = None,
    policy: Policy | None = None,
) -> Snapshot:
    """Read ``squeue --json`` and ``sinfo --json`` documents into a :class:`Snapshot`.

    ``now`` is the Unix time of the read; ``policy`` the round's policy
    (its ``allow_preemption`` is set from ``options``).
    """
    options = options or BridgeOptions()
    nodes, kept = build_nodes(parse_nodes(sinfo), options)
    builder = _Builder(nodes, options, now)
    jobs = [job for job in parse_jobs(squeue) if options.manages(job.partition)]
    for job in jobs:
        if job.state in HOLDING_STATES and job.nodes:
            builder.hold(job)
    for job in jobs:
        if job.state == "PENDING" and job.priority > 0 and job.required_nodes:
            builder.in_flight_job(job)
    for job in sorted(jobs, key=lambda j: (j.submit_time, int(j.id))):
        if job.held:
            builder.queued(job)
    known = gpu_types(nodes, options)
    base = (policy or Policy()).for_types(known)  # prices of types the partition has
    instance = Instance(
        name=f"slurm@{now}",
        gpu_types=known,
        nodes=builder.cpu_capacity(),
        running=tuple(builder.running),
        queue=tuple(builder.queue),
        policy=replace(base, allow_preemption=options.allow_preemption),
    )
    return Snapshot(
        instance=instance,
        now=now,
        jobs=MappingProxyType(builder.jobs),
        nodes=MappingProxyType(kept),
        in_flight=tuple(builder.in_flight),
        skipped=tuple(builder.skipped),
    )
