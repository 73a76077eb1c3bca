"""The round API another scheduler embeds: state between rounds, one call per round.

A Kubernetes controller, a Slurm plugin or the simulator keeps one
:class:`Scheduler`, tells it what happened (jobs submitted or finished, nodes
down or back, GPUs failed) and asks :meth:`Scheduler.decide` what to do now.
Times here are absolute seconds on the caller's clock; each round's
:class:`~whale_opt.problem_data.Instance` is built relative to ``now``, as
the file formats are.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from whale_opt.decision import Action, Decision
from whale_opt.policies import SchedulingPolicy, get_policy
from whale_opt.problem_data import Instance, Node, QueuedJob, RunningJob

log = logging.getLogger("whale_opt")


@dataclass(frozen=True)
class Placed:
    """A job holding GPUs: its request, its GPUs, when it started and should end."""

    job: QueuedJob
    gpus: tuple[str, ...]
    started_at: int
    expected_end: int


class Scheduler:
    """Cluster state between rounds and the policy that decides each round.

    Parameters
    ----------
    cluster
        GPU types, nodes, tenants and policy parameters; its running jobs and
        queue (times relative to ``cluster.now``) become the initial state.
    policy
        A registry name (``"wspt"``, ``"cpsat"``, ...) or any object with the
        :class:`~whale_opt.policies.SchedulingPolicy` shape.
    """

    def __init__(
        self,
        cluster: Instance,
        policy: str | SchedulingPolicy = "wspt",
        *,
        preset: str | None = None,
    ) -> None:
        self.template = cluster
        self.policy = get_policy(policy, preset=preset) if isinstance(policy, str) else policy
        self.nodes: dict[str, Node] = {node.id: node for node in cluster.nodes}
        self.queue: dict[str, QueuedJob] = {}
        self.running: dict[str, Placed] = {}
        now = cluster.now
        for job in cluster.queue:
            self.queue[job.id] = replace(job, submitted_at=now + job.submitted_at)
        for held in cluster.running:
            spec = QueuedJob(
                id=held.id,
                gpus=len(held.gpus),
                duration_s=held.remaining_s,
                tenant=held.tenant,
                cpu=held.cpu,
                memory_gb=held.memory_gb,
                weight=held.weight,
                preemptible=held.preemptible,
            )
            self.running[held.id] = Placed(
                spec, held.gpus, now + held.started_at, now + held.remaining_s
            )

    # -- what happened -----------------------------------------------------------

    def submit(self, job: QueuedJob) -> None:
        """A new job; its ``submitted_at`` is absolute."""
        if job.id in self.queue or job.id in self.running:
            raise ValueError(f"job {job.id!r} is already known")
        self.queue[job.id] = job

    def finish(self, job_id: str) -> None:
        """A running job ended (or was cancelled): its GPUs are free."""
        if self.running.pop(job_id, None) is None and self.queue.pop(job_id, None) is None:
            raise KeyError(job_id)

    def set_node_down(self, node_id: str, down: bool = True) -> list[str]:
        """Take a node out (or bring it back); returns the jobs that lost GPUs there.

        Jobs that lost GPUs stay in :attr:`running` until the caller requeues
        them with :meth:`requeue` (it knows how much work they saved).
        """
        self.nodes[node_id] = replace(self.nodes[node_id], down=down)
        return self._hit(lambda gpu: gpu.rpartition("/")[0] == node_id) if down else []

    def fail_gpu(self, gpu_id: str, failed: bool = True) -> list[str]:
        """Mark one GPU failed (or repaired); returns the jobs that lost it."""
        node_id, _, index_text = gpu_id.rpartition("/")
        node = self.nodes[node_id]
        broken = set(node.failed_gpus)
        if failed:
            broken.add(int(index_text))
        else:
            broken.discard(int(index_text))
        self.nodes[node_id] = replace(node, failed_gpus=tuple(sorted(broken)))
        return self._hit(lambda gpu: gpu == gpu_id) if failed else []

    def _hit(self, lost: Callable[[str], bool]) -> list[str]:
        return sorted(job_id for job_id, held in self.running.items() if any(map(lost, held.gpus)))

    def requeue(self, job_id: str, remaining_fraction: float, now: int) -> QueuedJob:
        """Put a running job back in the queue with ``remaining_fraction`` of its work."""
        held = self.running.pop(job_id)
        fraction = min(1.0, max(remaining_fraction, 1e-9))
        job = held.job
        again = replace(
            job,
            duration_s=None
            if job.duration_s is None
            else max(1, math.ceil(job.duration_s * fraction)),
            duration_by_type_s=tuple(
                (name, max(1, math.ceil(seconds * fraction)))
                for name, seconds in job.duration_by_type_s
            ),
            submitted_at=job.submitted_at,
            attained_gpu_s=job.attained_gpu_s + len(held.gpus) * max(0, now - held.started_at),
        )
        self.queue[job_id] = again
        log.info("requeued %s with %.0f%% of its work at t=%d", job_id, 100 * fraction, now)
        return again

    # -- what now ----------------------------------------------------------------

    def snapshot(self, now: int) -> Instance:
        """This round's instance: everything relative to ``now``."""
        running = tuple(
            RunningJob(
                id=held.job.id,
                gpus=held.gpus,
                remaining_s=max(1, held.expected_end - now),
                tenant=held.job.tenant,
                cpu=held.job.cpu,
                memory_gb=held.job.memory_gb,
                started_at=held.started_at - now,
                weight=held.job.weight,
                preemptible=held.job.preemptible,
            )
            for held in self.running.values()
        )
        queue = tuple(
            replace(job, submitted_at=job.submitted_at - now) for job in self.queue.values()
        )
        return Instance(
            name=f"{self.template.name}@{now}",
            gpu_types=self.template.gpu_types,
            nodes=tuple(self.nodes.values()),
            running=running,
            queue=queue,
            tenants=self.template.tenants,
            policy=self.template.policy,
            now=now,
        )

    def decide(self, now: int) -> Decision:
        """Run the policy on the current state and start what it starts."""
        decision = self.policy.decide(self.snapshot(now))
        self.apply(decision, now)
        return decision

    def apply(self, decision: Decision, now: int) -> None:
        """Move the decision's started jobs from the queue to running."""
        for item in decision.jobs:
            if item.action is Action.START:
                job = self.queue.pop(item.id)
                self.running[item.id] = Placed(job, item.gpus, now, now + (item.end_s or 0))
            elif item.action is Action.PREEMPT:
                held = self.running[item.id]
                span = max(1, held.expected_end - held.started_at)
                self.requeue(item.id, (held.expected_end - now) / span, now)
