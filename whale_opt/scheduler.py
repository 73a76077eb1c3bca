"""The round API another scheduler embeds: state between rounds, one call per round.

A Kubernetes controller, a Slurm plugin or the simulator keeps one
:class:`Scheduler`, tells it what happened (jobs submitted or finished, nodes
down, draining or back, GPUs failed, checkpoints written) and asks
:meth:`Scheduler.decide` what to do now. Times here are absolute seconds on
the caller's clock; each round's :class:`~whale_opt.problem_data.Instance`
is built relative to ``now``, as the file formats are.

**Work, checkpoints and restarts.** The scheduler keeps each job's remaining
*work* (its durations, scaled down as attempts save progress). A running job
saves its state at checkpoints: the ones the caller reports
(:meth:`Scheduler.checkpointed`), or else one every ``checkpoint_interval_s``
seconds of computing. An attempt's start counts as saved (it resumes from
the last checkpoint). A job interrupted by a failure or a preemption goes
back to the queue with the work left at its last checkpoint, keeping its
class, tenant, preferences and submission time (so its aging goes on), and
its next attempt first spends ``checkpoint_s`` restoring: the restore is
added to the queued job's durations. This is what the objective prices a
preemption at (:func:`whale_opt.decision.preemption_cost`): the work since
the last checkpoint plus ``checkpoint_s``.

**Lost jobs.** A running job with a GPU on a node that went down or on a GPU
that failed is lost. A caller may requeue it at once (:meth:`requeue`, with
what :meth:`set_node_down` and :meth:`fail_gpu` return) or leave it: the next
round's instance has it in :attr:`~whale_opt.problem_data.Instance.lost`, the
decision reports it ``lost``, and :meth:`apply` requeues it from its last
checkpoint as it requeues a preempted job.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from whale_opt.decision import Action, Decision
from whale_opt.options import SolveOptions
from whale_opt.policies import SchedulingPolicy
from whale_opt.problem_data import (
    MILLI,
    GpuType,
    Instance,
    Node,
    QueuedJob,
    RunningJob,
    hardware_failure,
)
from whale_opt.registry import get_policy
from whale_opt.solve import SPLIT_ABOVE_GPUS, solve

log = logging.getLogger("whale_opt")


class UnknownId(KeyError):
    """A job or node id the scheduler does not hold; the message says which."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Placed:
    """A job holding GPUs: its request, its GPUs, when it started and should end.

    ``restore_s`` is the restart overhead the attempt began with (seconds of
    ``expected_end - started_at`` spent restoring, not computing);
    ``checkpoint_at`` the last checkpoint the caller reported during this
    attempt (None: none reported). ``node``: a CPU-only job's node (it holds no GPU).
    """

    job: QueuedJob
    gpus: tuple[str, ...]
    started_at: int
    expected_end: int
    restore_s: int = 0
    checkpoint_at: int | None = None
    node: str | None = None


class Scheduler:
    """Cluster state between rounds and the policy that decides each round.

    Parameters
    ----------
    cluster
        GPU types, nodes, tenants, priority classes and policy parameters;
        its running jobs (lost ones too: the first round reports them) and
        queue (times relative to ``cluster.now``) become the initial state.
    policy
        A registry name (``"cpsat"``, the default, ``"wspt"``, ...), decided as
        :func:`whale_opt.solve.solve` decides (rounds on more than
        ``split_above_gpus`` GPUs split into pools), or any object with the
        :class:`~whale_opt.policies.SchedulingPolicy` shape, called as it is.
    options
        Run settings of every round (time limit, seed, bound, preset; default
        ``SolveOptions()``).
    preset
        CP-SAT parameter preset (ignored by the heuristics); overrides the
        one in ``options``.
    checkpoint_interval_s
        Running jobs are assumed to checkpoint every this many seconds of
        computing, unless the caller reports their checkpoints (None: no
        checkpoint unless reported; an interruption loses the attempt).
    checkpoint_s
        Default restore time of a job's restart after an interruption (a
        job's own, given to :meth:`submit`, wins).
    split_above_gpus
        Clusters above this many GPUs are solved pool by pool (None: never).
    carry_plan
        Hand the last applied decision's plan to the next round as its hint
        (:meth:`round_options`). Off by default: over replays it did not beat
        rounds that start from scratch (``bench/CARRY_PLAN.md``).
    """

    def __init__(
        self,
        cluster: Instance,
        policy: str | SchedulingPolicy = "cpsat",
        *,
        options: SolveOptions | None = None,
        preset: str | None = None,
        checkpoint_interval_s: int | None = None,
        checkpoint_s: int = 0,
        split_above_gpus: int | None = SPLIT_ABOVE_GPUS,
        carry_plan: bool = False,
    ) -> None:
        if checkpoint_interval_s is not None and checkpoint_interval_s < 1:
            raise ValueError(f"checkpoint_interval_s must be >= 1 (got {checkpoint_interval_s})")
        if checkpoint_s < 0:
            raise ValueError(f"checkpoint_s must be >= 0 (got {checkpoint_s})")
        self.template = cluster
        self.solver = policy if isinstance(policy, str) else None
        options = SolveOptions() if options is None else options
        self.options = options if preset is None else options.replace(preset=preset)
        self.policy = (
            get_policy(policy, preset=self.options.preset) if isinstance(policy, str) else policy
        )
        self.checkpoint_interval_s = checkpoint_interval_s
        self.checkpoint_s = checkpoint_s
        self.split_above_gpus = split_above_gpus
        self._nodes: dict[str, Node] = {node.id: node for node in cluster.nodes}
        # The node records as a tuple, made again only when one changes (nodes.setter).
        self._node_tuple: tuple[Node, ...] = tuple(self._nodes.values())
        self.queue: dict[str, QueuedJob] = {}
        self.running: dict[str, Placed] = {}
        self.work: dict[str, QueuedJob] = {}  # remaining work, without restore time
        self.restore_s: dict[str, int] = {}  # restore time of each job's restarts
        self.restore_due: dict[str, int] = {}  # queued jobs whose next start restores
        # The last applied decision's planned jobs, earliest start first (the hint).
        self.plan: tuple[str, ...] = ()
        self.carry_plan = carry_plan
        now = cluster.now
        for job in cluster.queue:
            self.submit(replace(job, submitted_at=now + job.submitted_at))
        for held in (*cluster.running, *cluster.lost):
            self._adopt(held, now)

    def _adopt(self, held: RunningJob, now: int) -> None:
        """A job running in the initial cluster: its attempt started at ``started_at``."""
        where = self.template.held_nodes(held)[0]
        gpu_type = self.template.nodes[where].gpu_type
        attempt_s = held.remaining_s - held.started_at  # on its GPU type
        # A GPU job's work on speed-1.0 GPUs; a CPU-only job's is as long anywhere.
        speed = self.template.gpu_types[gpu_type].speed if held.gpu_ids else 1.0
        spec = QueuedJob(
            id=held.id,
            gpu_count=len(held.gpu_ids),
            duration_s=math.ceil(attempt_s * speed),
            topology=self.template.held_topology(held),  # its own rule is not known
            tenant=held.tenant,
            cpu=held.cpu,
            memory_gb=held.memory_gb,
            weight=held.weight,
            submitted_at=now + held.started_at,
            preemptible=held.preemptible,
            priority_class=held.priority_class,
            gpu_milli=held.gpu_milli,
        )
        saved = None if held.since_checkpoint_s is None else now - held.since_checkpoint_s
        self.work[held.id] = spec
        self.restore_s[held.id] = held.checkpoint_s
        self.running[held.id] = Placed(
            spec,
            held.gpu_ids,
            now + held.started_at,
            now + held.remaining_s,
            checkpoint_at=saved,
            node=held.node,
        )

    # -- what happened -----------------------------------------------------------

    def submit(self, job: QueuedJob, *, checkpoint_s: int | None = None) -> None:
        """A new job; its ``submitted_at`` is absolute.

        ``checkpoint_s`` is its restore time after an interruption (default:
        the scheduler's).
        """
        if job.id in self.queue or job.id in self.running:
            raise ValueError(f"job {job.id!r} is already known")
        if checkpoint_s is not None and checkpoint_s < 0:
            raise ValueError(f"checkpoint_s must be >= 0 (got {checkpoint_s})")
        # Refused here, by its id: accepted, it would fail every later round's snapshot.
        self.template.check_job(job, f"job {job.id}")
        self.queue[job.id] = job
        self.work[job.id] = job
        self.restore_s[job.id] = self.checkpoint_s if checkpoint_s is None else checkpoint_s

    def finish(self, job_id: str) -> None:
        """A running job ended (or was cancelled): its GPUs are free."""
        if self.running.pop(job_id, None) is None and self.queue.pop(job_id, None) is None:
            raise UnknownId(f"no job {job_id!r} is queued or running")
        for table in (self.work, self.restore_s, self.restore_due):
            table.pop(job_id, None)

    def checkpointed(self, job_id: str, now: int) -> None:
        """Running job ``job_id`` saved its state at ``now``.

        Once a checkpoint of an attempt is reported, reports alone say what
        an interruption of that attempt loses (the default interval no longer
        applies to it).
        """
        held = self._running(job_id)
        if now < held.started_at:
            raise ValueError(f"checkpoint of {job_id!r} at {now} precedes its start")
        if held.checkpoint_at is not None and now < held.checkpoint_at:
            raise ValueError(
                f"checkpoint of {job_id!r} at {now} precedes its last, at {held.checkpoint_at}"
            )
        self.running[job_id] = replace(held, checkpoint_at=now)

    def set_node_down(self, node_id: str, down: bool = True) -> list[str]:
        """Take a node out (or bring it back); returns the jobs that lost GPUs there.

        Jobs that lost GPUs stay in :attr:`running` until the caller requeues
        them with :meth:`requeue`.
        """
        self._set_node(replace(self._node(node_id), down=down))
        return self._on_node(node_id) if down else []

    def drain(self, node_id: str, draining: bool = True) -> list[str]:
        """Stop (or resume) new work on a node; its running jobs keep going.

        Returns the jobs still running there: the node is empty once they end.
        """
        self._set_node(replace(self._node(node_id), draining=draining))
        return self._on_node(node_id)

    def fail_gpu(self, gpu_id: str, failed: bool = True) -> list[str]:
        """Mark one GPU failed (or repaired); returns the jobs that lost it.

        Raises ValueError when ``gpu_id`` is not ``<node>/<index>`` of a GPU of
        a known node (``n1/3``; not ``n1/03``).
        """
        node, index = self._gpu(gpu_id)
        broken = set(node.failed_gpus)
        if failed:
            broken.add(index)
        else:
            broken.discard(index)
        self._set_node(replace(node, failed_gpus=tuple(sorted(broken))))
        return self._hit(lambda gpu: gpu == gpu_id) if failed else []

    def _gpu(self, gpu_id: str) -> tuple[Node, int]:
        """The node and index of GPU ``gpu_id``: the cluster's own parse
        (:meth:`~whale_opt.problem_data.Instance.parse_gpu`), a FieldError (a
        ValueError) naming it when it names no GPU."""
        ref = self.template.parse_gpu(gpu_id)
        return self.nodes[self.template.nodes[ref.node].id], ref.index

    def _running(self, job_id: str) -> Placed:
        """Running job ``job_id``; :class:`UnknownId` when none runs."""
        held = self.running.get(job_id)
        if held is None:
            raise UnknownId(f"no job {job_id!r} is running")
        return held

    def _node(self, node_id: str) -> Node:
        """Node ``node_id``; :class:`UnknownId` when the cluster has none."""
        node = self.nodes.get(node_id)
        if node is None:
            raise UnknownId(f"the cluster has no node {node_id!r}")
        return node

    def _hit(self, lost: Callable[[str], bool], node_id: str | None = None) -> list[str]:
        """The running jobs holding a GPU ``lost`` is true of, or (CPU-only) on
        node ``node_id``."""
        return sorted(
            job_id
            for job_id, held in self.running.items()
            if (node_id is not None and held.node == node_id) or any(map(lost, held.gpus))
        )

    def _on_node(self, node_id: str) -> list[str]:
        """The running jobs on node ``node_id``: a GPU there, or (CPU-only) the node."""
        return self._hit(lambda gpu: gpu.rpartition("/")[0] == node_id, node_id)

    def requeue(self, job_id: str, remaining_fraction: float | None, now: int) -> QueuedJob:
        """Put a running job back in the queue; returns it as queued.

        ``remaining_fraction`` is the share of the attempt's work still to do
        (the caller may know its progress); None takes it from the last
        checkpoint (see the module docstring). The job keeps its class,
        tenant, preferences and submission time; its restart pays its
        restore time.
        """
        held = self._running(job_id)
        del self.running[job_id]
        if remaining_fraction is None:
            remaining_fraction = 1.0 - self.saved_fraction(job_id, now, held)
        fraction = min(1.0, max(remaining_fraction, 1e-9))
        work = self.work[job_id]
        left = replace(
            _scaled(work, fraction),
            attained_gpu_s=work.attained_gpu_s + len(held.gpus) * max(0, now - held.started_at),
        )
        self.work[job_id] = left
        self.restore_due[job_id] = self.restore_s.get(job_id, 0)
        again = _with_restore(left, self.restore_due[job_id], self.template.gpu_types)
        self.queue[job_id] = again
        log.info("requeued %s with %.0f%% of its work at t=%d", job_id, 100 * fraction, now)
        return again

    # -- checkpoints ---------------------------------------------------------------

    def last_saved(self, job_id: str, now: int, held: Placed | None = None) -> int:
        """When running job ``job_id``'s state was last saved, as of ``now``.

        The last reported checkpoint of this attempt; else the last one the
        default interval implies; else (and before either) the attempt's start.
        """
        held = self._running(job_id) if held is None else held
        if held.checkpoint_at is not None:
            return max(held.started_at, min(held.checkpoint_at, now))
        interval = self.checkpoint_interval_s
        computing = now - held.started_at - held.restore_s
        if interval is None or computing < interval:
            return held.started_at
        return held.started_at + held.restore_s + computing // interval * interval

    def saved_fraction(self, job_id: str, now: int, held: Placed | None = None) -> float:
        """The share of running job ``job_id``'s attempt work saved by ``now``
        (by its estimate: computing saved over the attempt's expected computing)."""
        held = self._running(job_id) if held is None else held
        computing = max(1, held.expected_end - held.started_at - held.restore_s)
        saved = max(0, self.last_saved(job_id, now, held) - held.started_at - held.restore_s)
        return min(1.0, saved / computing)

    def _known_checkpoints(self, held: Placed) -> bool:
        return held.checkpoint_at is not None or self.checkpoint_interval_s is not None

    # -- what now ----------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, Node]:
        """The node records by id, as they are now (read only: they change through
        :meth:`set_node_down`, :meth:`drain` and :meth:`fail_gpu`, or all at once by
        assigning them)."""
        return MappingProxyType(self._nodes)

    @nodes.setter
    def nodes(self, records: Mapping[str, Node]) -> None:
        """Replace every node record (a scheduler restored from a snapshot)."""
        self._nodes = dict(records)
        self._node_tuple = tuple(self._nodes.values())

    def node_records(self) -> tuple[Node, ...]:
        """The node records as a tuple: the very same tuple round after round while
        none changed (what depends on the nodes alone is then found by identity, see
        :mod:`whale_opt.memo`)."""
        return self._node_tuple

    def _set_node(self, node: Node) -> None:
        self.nodes = {**self._nodes, node.id: node}

    def snapshot(self, now: int) -> Instance:
        """This round's instance: everything relative to ``now``; running jobs with
        a GPU on failed hardware, not requeued yet, are its lost jobs.

        Raises ValueError when ``now`` is before a running job's start: rounds
        go forward in time.
        """
        for job_id, held in self.running.items():
            if held.started_at > now:
                raise ValueError(
                    f"now={now} is before running job {job_id!r} started (at {held.started_at}):"
                    " a round cannot come before the rounds it follows"
                )
        held_now = tuple(
            RunningJob(
                id=held.job.id,
                gpu_ids=held.gpus,
                remaining_s=max(1, held.expected_end - now),
                tenant=held.job.tenant,
                cpu=held.job.cpu,
                memory_gb=held.job.memory_gb,
                started_at=held.started_at - now,
                weight=held.job.weight,
                preemptible=held.job.preemptible,
                checkpoint_s=self.restore_s.get(job_id, 0),
                priority_class=held.job.priority_class,
                gpu_milli=held.job.gpu_milli,
                node=held.node,
                since_checkpoint_s=now - self.last_saved(job_id, now, held)
                if self._known_checkpoints(held)
                else None,
            )
            for job_id, held in self.running.items()
        )
        lost = tuple(job for job in held_now if hardware_failure(self.nodes, job.gpu_ids, job.node))
        queue = tuple(
            replace(job, submitted_at=job.submitted_at - now) for job in self.queue.values()
        )
        return Instance(
            name=f"{self.template.name}@{now}",
            gpu_types=self.template.gpu_types,
            nodes=self.node_records(),
            running=tuple(job for job in held_now if job not in lost),
            queue=queue,
            tenants=self.template.tenants,
            policy=self.template.policy,
            now=now,
            priority_classes=self.template.priority_classes,
            lost=lost,
        )

    def propose(self, now: int, instance: Instance | None = None) -> Decision:
        """The policy's decision for this round; the state is left as it is.

        ``instance`` is the round's :meth:`snapshot` when the caller already
        holds it.
        """
        instance = self.snapshot(now) if instance is None else instance
        if self.solver is None:
            return self.policy.decide(instance, self.options)  # the caller's own policy object
        # Large or overloaded rounds are split into pools or cut to their head.
        return solve(
            instance,
            self.solver,
            self.round_options(),
            split_above_gpus=self.split_above_gpus,
            policy=self.policy,
        )

    def round_options(self) -> SolveOptions:
        """The run settings of the next round: :attr:`options`, with the last applied
        decision's plan as the hint (see :class:`~whale_opt.options.SolveOptions`)."""
        if not self.plan or not self.carry_plan:
            return self.options
        return self.options.replace(hint=self.plan)

    def decide(self, now: int) -> Decision:
        """Run the policy on the current state; apply its starts, preemptions and
        lost jobs."""
        decision = self.propose(now)
        self.apply(decision, now)
        return decision

    def apply(
        self, decision: Decision, now: int, remaining: Mapping[str, float] | None = None
    ) -> None:
        """Requeue the decision's preempted and lost jobs, then move its started
        jobs to running.

        A preempted or lost job goes back with ``remaining[job_id]`` of its
        attempt's work when the caller knows it, else with the work left at its
        last checkpoint; its restart pays its restore time.

        Raises ValueError, and changes nothing, when the decision does not fit
        this state: it starts a job that is not queued, preempts one that is not
        running, or starts a job on GPUs that are not this cluster's or that
        running jobs already fill (a decision made on another state: two
        proposals applied one after the other). The rest of the rules are the
        checker's (:func:`whale_opt.check.check`, against the instance the
        decision was made on).
        """
        self._refuse_clashes(decision)
        remaining = remaining or {}
        planned = sorted(
            (item.start_s or 0, item.id) for item in decision.by_action(Action.PLANNED)
        )
        self.plan = tuple(job_id for _, job_id in planned)
        for item in decision.jobs:
            if item.action in (Action.PREEMPT, Action.LOST):
                self.requeue(item.id, remaining.get(item.id), now)
        for item in decision.by_action(Action.START):
            job = self.queue.pop(item.id)
            restore = self.restore_due.pop(item.id, 0)
            self.running[item.id] = Placed(
                job, item.gpu_ids, now, now + (item.end_s or 0), restore, node=item.cpu_only_node
            )

    def _refuse_clashes(self, decision: Decision) -> None:
        """ValueError when ``decision`` does not fit this state (see :meth:`apply`)."""
        freed = set()
        for item in decision.jobs:
            if item.action in (Action.PREEMPT, Action.LOST):
                if item.id not in self.running:
                    raise ValueError(f"job {item.id!r} is {item.action} but not running")
                freed.add(item.id)
        used: dict[str, int] = {}  # thousandths of each GPU held
        for job_id, held in self.running.items():
            if job_id not in freed:
                for gpu in held.gpus:
                    used[gpu] = used.get(gpu, 0) + held.job.gpu_milli
        for item in decision.by_action(Action.START):
            job = self.queue.get(item.id)
            if job is None:
                raise ValueError(f"job {item.id!r} is started but not queued")
            for gpu in item.gpu_ids:
                self._gpu(gpu)
                used[gpu] = used.get(gpu, 0) + job.gpu_milli
                if used[gpu] > MILLI:
                    raise ValueError(
                        f"job {item.id!r} is started on {gpu}, which running jobs already"
                        " fill (was the decision made on another state?)"
                    )


def _scaled(job: QueuedJob, fraction: float) -> QueuedJob:
    """``job`` with ``fraction`` of its durations (whole seconds, at least 1)."""
    return replace(
        job,
        duration_s=None
        if job.duration_s is None
        else max(1, math.ceil(job.duration_s * fraction - 1e-9)),
        duration_by_type_s=tuple(
            (name, max(1, math.ceil(seconds * fraction - 1e-9)))
            for name, seconds in job.duration_by_type_s
        ),
    )


def _with_restore(job: QueuedJob, restore_s: int, gpu_types: Mapping[str, GpuType]) -> QueuedJob:
    """``job`` with ``restore_s`` added to its duration on every type.

    Restoring takes wall time, not GPU speed: the durations become per type,
    each the work there plus the restore.
    """
    if restore_s == 0:
        return job
    by_type = dict(job.duration_by_type_s)
    for name, gpu_type in gpu_types.items():
        if name not in by_type and job.duration_s is not None:
            by_type[name] = math.ceil(job.duration_s / gpu_type.speed)
    return replace(
        job,
        duration_s=None if job.duration_s is None else job.duration_s + restore_s,
        duration_by_type_s=tuple(sorted((name, s + restore_s) for name, s in by_type.items())),
    )
