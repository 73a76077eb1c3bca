"""The solver-agnostic checker: does a decision respect every rule?

:func:`check` names every violation it finds; an empty list means the
decision is valid for the instance. It imports only the data model, the
decision records and the topology (for NVLink connectivity), never a
solver, so it can judge any of them, ours or a user's.

Rules beyond FORMAT.md's wording, kept in one place here:

- every job once, with an action that fits it; a lost job (running when its
  hardware failed) is reported ``lost`` and nothing else, and only a lost job
  is (:mod:`whale_opt.check.coverage`). A lost job holds no GPU: its healthy
  ones are free for a start, its failed ones are failed for everyone;

- a job's GPUs are all of one GPU type;
- ``planned`` jobs are checked by GPU *count* per node over time (no GPU
  ids are reserved for the future), with CPU, host memory and quotas;
- GPU sharing: the shares (``gpu_milli``) on a GPU add up to at most 1000 at
  every moment, and a whole-GPU job takes only a GPU no share is on. A GPU
  with shares on it counts as one whole GPU of its node until its last share
  ends; a planned share counts as its fraction of a GPU (as quotas count
  every share). A CPU-only job (``gpus`` 0) names its one node and holds its
  CPU and memory there;
- a tenant already over quota through running jobs may keep them, but no
  started or planned job of that tenant may run while it is over;
- the release rule of :mod:`whale_opt.rules`: a planned NVLink job on a node
  whose GPUs are not all linked starts no earlier than the first end of a
  job on that node.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from whale_opt.check.coverage import coverage
from whale_opt.check.uses import Use, first_overload
from whale_opt.decision import (
    Action,
    Decision,
    JobDecision,
    dropped_preferences,
    objective,
    placement_of,
    planned_counts,
)
from whale_opt.problem_data import MILLI, FieldError, Instance, QueuedJob
from whale_opt.rules import preemption_problems, unreleased_plans
from whale_opt.topology import node_topologies, nvlink_breaches, popcount

TOLERANCE = 1e-6


@dataclass(frozen=True)
class Violation:
    """One broken rule: which job (if any), what kind, and the facts."""

    job: str | None
    kind: str
    message: str

    def __str__(self) -> str:
        where = f"{self.job}: " if self.job else ""
        return f"[{self.kind}] {where}{self.message}"


class _Checker:
    def __init__(self, instance: Instance, decision: Decision) -> None:
        self.instance = instance
        self.decision = decision
        self.topologies = node_topologies(instance)
        self.violations: list[Violation] = []
        self.uses: list[Use] = []
        self.held_now: dict[str, str] = {}
        # shared GPU id -> (job, milli, end, new) of each share on it now
        self.shares: dict[str, list[tuple[str, int, int, bool]]] = defaultdict(list)

    def flag(self, job: str | None, kind: str, message: str) -> None:
        self.violations.append(Violation(job, kind, message))

    def run(self) -> list[Violation]:
        items = self._coverage()
        self._running(items)
        for position, job in enumerate(self.instance.queue):
            item = items.get(job.id)
            if item is None:
                continue
            if item.action is Action.START:
                self._started(position, job, item)
            elif item.action is Action.PLANNED:
                self._planned(position, job, item)
            if item.action in (Action.START, Action.PLANNED):
                self._draining_and_preferences(position, job, item)
            elif item.dropped:
                self.flag(job.id, "preferences", f"is {item.action} yet reports dropped ones")
        self._shared_gpus()
        self._capacity()
        self._planned_after_release()
        self._quotas()
        self._summary()
        return self.violations

    def _coverage(self) -> dict[str, JobDecision]:
        """Every job once, with an action that fits its kind (:mod:`.coverage`)."""
        items, problems = coverage(self.instance, self.decision.jobs)
        for job_id, kind, message in problems:
            self.flag(job_id, kind, message)
        return items

    def _running(self, items: dict[str, JobDecision]) -> None:
        """Kept running jobs hold their GPUs; preemptions follow :mod:`whale_opt.rules`."""
        for job_id, message in preemption_problems(self.instance, items.values()):
            self.flag(job_id, "preemption", message)
        for job in self.instance.running:
            item = items.get(job.id)
            if item is not None and item.action is Action.PREEMPT:
                continue
            per_node: dict[int, int] = defaultdict(int)
            for gpu in job.gpu_ids:
                if job.shares:
                    self.shares[gpu].append((job.id, job.gpu_milli, job.remaining_s, False))
                else:
                    self.held_now[gpu] = job.id
                per_node[self.instance.parse_gpu(gpu).node] += 1
            if job.node is not None:
                per_node[self.instance.node_index[job.node]] = 0
            self._hold(
                job.id,
                job.tenant,
                per_node,
                job.cpu,
                job.memory_gb,
                0,
                job.remaining_s,
                new=False,
                milli=job.gpu_milli,
                counted=not job.shares,
            )

    def _hold(
        self,
        job_id: str,
        tenant: str,
        per_node: dict[int, int],
        cpu: float,
        memory_gb: float,
        start: int,
        end: int,
        *,
        new: bool,
        milli: int = MILLI,
        counted: bool = True,
    ) -> None:
        """A job's use of each node: CPU and memory in proportion to its GPUs there
        (a CPU-only job has one node); its GPUs count against the node's
        unless ``counted`` is off (shares now: :meth:`_shared_gpus` counts them)."""
        total = sum(per_node.values())
        for node, count in per_node.items():
            share = count / total if total else 1.0
            amount = count * milli / MILLI
            self.uses.append(
                Use(
                    job_id,
                    tenant,
                    node,
                    amount if counted else 0.0,
                    amount,
                    cpu * share,
                    memory_gb * share,
                    start,
                    end,
                    new,
                )
            )

    def _shared_gpus(self) -> None:
        """Shares on a GPU add up to at most 1000; the GPU counts whole on its node
        until its last share ends."""
        for gpu, shares in self.shares.items():
            total = sum(milli for _, milli, _, _ in shares)
            news = [job for job, _, _, new in shares if new]
            if total > MILLI and news:
                self.flag(
                    news[-1], "gpu-share", f"shares on GPU {gpu} add up to {total} > {MILLI} milli"
                )
            node = self.instance.parse_gpu(gpu).node
            end = max(end for _, _, end, _ in shares)
            who = news[-1] if news else shares[0][0]
            self.uses.append(Use(who, "", node, 1.0, 0.0, 0.0, 0.0, 0, end, bool(news)))

    def _started(self, position: int, job: QueuedJob, item: JobDecision) -> None:
        """GPU ids valid, healthy, free, of one eligible type, in the job's topology."""
        refs = []
        for gpu in item.gpu_ids:
            try:
                refs.append(self.instance.parse_gpu(gpu))
            except FieldError as exc:
                self.flag(job.id, "gpu-id", exc.message + f": {gpu!r}")
                return
        if len(item.gpu_ids) != job.gpu_count:
            self.flag(
                job.id, "gang", f"needs {job.gpu_count} GPUs at once, got {len(item.gpu_ids)}"
            )
        if len(set(item.gpu_ids)) != len(item.gpu_ids):
            self.flag(job.id, "gpu-twice", "lists a GPU more than once")
        for gpu, ref in zip(item.gpu_ids, refs, strict=True):
            node = self.instance.nodes[ref.node]
            if node.down or ref.index in node.failed_gpus:
                self.flag(job.id, "failed-hardware", f"GPU {gpu} is on failed hardware")
            holder = self.held_now.get(gpu)
            if holder is not None:
                self.flag(job.id, "gpu-twice", f"GPU {gpu} is already held by {holder}")
            if job.shares:
                self.shares[gpu].append((job.id, job.gpu_milli, item.end_s or 0, True))
                continue
            if gpu in self.shares:
                sharers = ", ".join(j for j, _, _, _ in self.shares[gpu])
                self.flag(job.id, "gpu-twice", f"GPU {gpu} is shared by {sharers}: not whole")
            self.held_now[gpu] = job.id
        if item.start_s != 0:
            self.flag(job.id, "start-time", f"a started job has start_s 0, got {item.start_s}")
        per_node: dict[int, int] = defaultdict(int)
        masks: dict[int, int] = defaultdict(int)
        for ref in refs:
            per_node[ref.node] += 1
            masks[ref.node] |= 1 << ref.index
        if job.cpu_only and not self._cpu_only_node(job, item, per_node):
            return
        gpu_type = self._one_type(position, job, list(per_node))
        if gpu_type is not None:
            self._end_time(position, job, item, 0, gpu_type)
        self._topology(job, {n: popcount(m) for n, m in masks.items()}, masks)
        self._hold(
            job.id,
            job.tenant,
            per_node,
            job.cpu,
            job.memory_gb,
            0,
            item.end_s or 0,
            new=True,
            milli=job.gpu_milli,
            counted=not job.shares,
        )

    def _cpu_only_node(self, job: QueuedJob, item: JobDecision, per_node: dict[int, int]) -> bool:
        """A started CPU-only job names one known node that is up (added to
        ``per_node``); False, flagged, when it does not."""
        if len(item.nodes) != 1 or item.nodes[0] not in self.instance.node_index:
            self.flag(job.id, "planned-nodes", f"a CPU-only start names one node, got {item.nodes}")
            return False
        node = self.instance.node_index[item.nodes[0]]
        if self.instance.nodes[node].down:
            self.flag(job.id, "failed-hardware", f"node {item.nodes[0]} is down")
        per_node[node] = 0
        return True

    def _planned(self, position: int, job: QueuedJob, item: JobDecision) -> None:
        """Known nodes of one eligible type, counts that add up, times in range."""
        unknown = [n for n in item.nodes if n not in self.instance.node_index]
        if unknown or not item.nodes:
            self.flag(job.id, "planned-nodes", f"names unknown or no nodes: {unknown}")
            return
        counts = planned_counts(item, job.gpu_count)
        fewest = 0 if job.cpu_only else 1
        if len(counts) != len(item.nodes) or sum(counts) != job.gpu_count or min(counts) < fewest:
            self.flag(job.id, "gang", f"node_gpus {list(counts)} do not add up to {job.gpu_count}")
            return
        if len(set(item.nodes)) != len(item.nodes):
            self.flag(job.id, "planned-nodes", "lists a node twice")
            return
        start = item.start_s if item.start_s is not None else -1
        if not 1 <= start <= self.instance.policy.horizon_s:
            self.flag(
                job.id,
                "start-time",
                f"planned start_s must be in 1..horizon {self.instance.policy.horizon_s},"
                f" got {item.start_s}",
            )
        per_node = {self.instance.node_index[n]: c for n, c in zip(item.nodes, counts, strict=True)}
        gpu_type = self._one_type(position, job, list(per_node))
        if gpu_type is not None:
            self._end_time(position, job, item, start, gpu_type)
        for node, count in per_node.items():
            topo = self.topologies[node]
            if count > popcount(topo.healthy):
                self.flag(
                    job.id,
                    "failed-hardware",
                    f"node {topo.node.id} has {popcount(topo.healthy)} usable GPUs,"
                    f" {count} planned",
                )
        if job.cpu_only and len(per_node) != 1:
            self.flag(job.id, "topology", f"a CPU-only job runs on one node, not {len(per_node)}")
        self._topology(job, per_node, None)
        self._hold(
            job.id,
            job.tenant,
            dict(per_node),
            job.cpu,
            job.memory_gb,
            max(start, 0),
            item.end_s or 0,
            new=True,
            milli=job.gpu_milli,
        )

    def _draining_and_preferences(self, position: int, job: QueuedJob, item: JobDecision) -> None:
        """No new work on a draining node; every dropped soft preference reported."""
        per_node, _ = placement_of(self.instance, item, job.gpu_count)
        for node in per_node:
            if self.instance.nodes[node].draining:
                self.flag(job.id, "draining", f"node {self.instance.nodes[node].id} is draining")
        actual = set(dropped_preferences(self.instance, position, item))
        reported = {name for name, _ in item.dropped}
        if actual != reported:
            self.flag(
                job.id,
                "preferences",
                f"drops {sorted(actual) or 'none'} but reports {sorted(reported) or 'none'}",
            )

    def _one_type(self, position: int, job: QueuedJob, nodes: list[int]) -> str | None:
        types = {self.instance.nodes[n].gpu_type for n in nodes}
        if len(types) != 1:
            self.flag(job.id, "gpu-type", f"mixes GPU types {sorted(types)}")
            return None
        (gpu_type,) = types
        if gpu_type not in self.instance.eligible_types[position]:
            memory = self.instance.gpu_types[gpu_type].memory_gb
            if memory < job.min_gpu_memory_gb:
                self.flag(
                    job.id,
                    "gpu-memory",
                    f"{gpu_type} has {memory} GB, job needs {job.min_gpu_memory_gb} GB",
                )
            else:
                self.flag(job.id, "gpu-type", f"{gpu_type} is not allowed for this job")
            return None
        return gpu_type

    def _end_time(
        self, position: int, job: QueuedJob, item: JobDecision, start: int, gpu_type: str
    ) -> None:
        expected = start + self.instance.durations[position][gpu_type]
        if item.end_s != expected:
            self.flag(
                job.id,
                "end-time",
                f"on {gpu_type} from {start} it ends at {expected}, decision says {item.end_s}",
            )

    def _topology(
        self, job: QueuedJob, per_node: dict[int, int], masks: dict[int, int] | None
    ) -> None:
        """One node, one rack, whole connected nodes, or connected GPUs, as asked."""
        racks = {self.instance.nodes[n].rack for n in per_node}
        if job.topology == "rack" and len(racks) > 1:
            self.flag(job.id, "topology", f"'{job.topology}' job spans racks {sorted(racks)}")
        if job.topology == "node" and len(per_node) > 1:
            self.flag(job.id, "topology", f"'node' job spans {len(per_node)} nodes")
        if job.topology != "nvlink":
            return
        for kind, message in nvlink_breaches(self.instance, self.topologies, job, per_node, masks):
            self.flag(job.id, kind, message)

    def _capacity(self) -> None:
        """GPU count, CPU and host memory per node, at every moment."""
        by_node: dict[int, list[Use]] = defaultdict(list)
        for use in self.uses:
            by_node[use.node].append(use)
        for node_pos, uses in by_node.items():
            node = self.instance.nodes[node_pos]
            limits = (
                ("GPUs", lambda u: u.gpus, len(node.healthy_indices)),
                ("CPU", lambda u: u.cpu, node.cpu),
                ("memory_gb", lambda u: u.memory_gb, node.memory_gb),
            )
            for label, amount, limit in limits:
                over = first_overload(uses, amount, limit + TOLERANCE * max(1.0, limit))
                if over is not None:
                    level, when, who = over
                    self.flag(
                        who,
                        "capacity",
                        f"node {node.id} {label} reach {level:g} > {limit:g} at t={when}",
                    )

    def _planned_after_release(self) -> None:
        """Planned NVLink jobs on partly linked nodes wait for a job there to end."""
        for job_id, release in unreleased_plans(self.instance, self.decision.jobs).items():
            item = self.decision.job(job_id)
            self.flag(
                job_id,
                "nvlink",
                f"planned at {item.start_s} on partially linked node {item.nodes[0]}"
                f" before anything there ends (first end: {release})",
            )

    def _quotas(self) -> None:
        """No started or planned job while its tenant is over its GPU quota."""
        by_tenant: dict[str, list[Use]] = defaultdict(list)
        for use in self.uses:
            by_tenant[use.tenant].append(use)
        for name, uses in by_tenant.items():
            tenant = self.instance.tenants.get(name)
            if tenant is None or tenant.gpu_quota is None:
                continue
            over = first_overload(uses, lambda u: u.quota, tenant.gpu_quota)
            if over is not None:
                used, when, who = over
                self.flag(
                    who,
                    "quota",
                    f"tenant {name} holds {used:g} GPUs at t={when}, quota {tenant.gpu_quota}",
                )

    def _summary(self) -> None:
        """Objective recomputed, bound below it, instance and horizon echoed."""
        if self.decision.instance != self.instance.name:
            self.flag(
                None,
                "instance",
                f"decision is for {self.decision.instance!r}, not {self.instance.name!r}",
            )
        expected = objective(self.instance, self.decision.jobs)
        if not math.isclose(self.decision.objective, expected, rel_tol=TOLERANCE, abs_tol=1e-3):
            self.flag(
                None, "objective", f"decision says {self.decision.objective}, recomputed {expected}"
            )
        if self.decision.bound > expected * (1 + TOLERANCE) + 1e-3:
            self.flag(None, "bound", f"bound {self.decision.bound} exceeds objective {expected}")
        if self.decision.horizon_s != self.instance.policy.horizon_s:
            self.flag(
                None,
                "horizon",
                f"horizon_s {self.decision.horizon_s} != policy {self.instance.policy.horizon_s}",
            )


def check(instance: Instance, decision: Decision) -> list[Violation]:
    """Every rule ``decision`` breaks on ``instance``; empty when it is valid."""
    return _Checker(instance, decision).run()
