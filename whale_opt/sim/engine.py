"""The simulator's event loop: a job trace replayed on a cluster, one round at a time.

:class:`EventLoop` owns the event heap and everything that happens between
rounds (arrivals, completions, failures, repairs, drains: the cluster and job
state), and stops at each round for a decision made elsewhere::

    loop = EventLoop(trace, cluster, config)
    while (pending := loop.advance()) is not None:
        loop.apply(loop.scheduler.propose(pending.now, pending.instance))

:func:`whale_opt.sim.simulate` is that loop with the configured policy; a
Gymnasium environment drives the same object with its own. The run's record
(:class:`~whale_opt.sim.record.RunRecord`) is ``loop.record``.

Events sit in a :mod:`heapq` of ``(time, kind, seq, payload)``: at equal times
completions come first (their GPUs are free for the round), then repairs,
failures, arrivals, and last the round, which sees everything of its second.
``seq`` breaks ties in push order, so a run is a pure function of its inputs
and seed. A cancelled completion (its job failed or was preempted) is left in
the heap and ignored when popped: its attempt number is stale.

Why a plain heap and not SimPy: every actor here is a one-shot callback
(a job ends, a node fails, a round runs), never a process that waits halfway;
SimPy would wrap each in a generator and an Event object and add its own heap
on top, for no expressiveness we use. The heap costs a tuple per event, has
no dependency and makes the tie-break order explicit, which the determinism
invariant needs. Simulated time is integer seconds; the time a round takes to
decide is measured, reported, and not charged to the simulated clock (the
decision applies at the round's second).

The loop drives only :class:`~whale_opt.scheduler.Scheduler`: ``submit`` on
arrival, ``finish`` on completion, ``set_node_down`` / ``fail_gpu`` and
``requeue`` on failures, ``drain`` on drains, ``snapshot`` and ``apply`` per
round (the driver asks ``propose``, or decides by itself). The scheduler sees
estimated durations only; actual ones stay here. It is told the same
checkpoint interval and restore times the loop runs, so the price it puts on
a preemption (work since the last checkpoint plus the restore) is what the
preemption then costs here; the share of work a preempted or failed job keeps
is the loop's (actual) one.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from whale_opt.check import Violation, check
from whale_opt.decision import Action, Decision
from whale_opt.options import SolveOptions
from whale_opt.policies import SchedulingPolicy
from whale_opt.problem_data import FieldError, Instance
from whale_opt.scheduler import Scheduler
from whale_opt.sim.attempts import Attempts
from whale_opt.sim.config import Outage, SimConfig
from whale_opt.sim.hardware import Hardware
from whale_opt.sim.jobs import eligible_types, job_runs
from whale_opt.sim.record import RunRecord
from whale_opt.sim.trace import TraceJob

COMPLETE, REPAIR, FAIL, ARRIVE, ROUND = range(5)


class DecisionError(RuntimeError):
    """A round's decision broke the checker's rules (raised only where decisions are checked)."""

    def __init__(self, at: int, violations: list[Violation]) -> None:
        self.at = at
        self.violations = violations
        listed = "; ".join(str(v) for v in violations[:5])
        super().__init__(f"round at t={at}: {len(violations)} violation(s): {listed}")


@dataclass(frozen=True)
class Changes:
    """What happened since the previous round, ids in event order."""

    arrived: tuple[str, ...] = ()
    completed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()  # running jobs a failure sent back to the queue
    hardware: tuple[str, ...] = ()  # nodes or GPUs down or back, nodes draining or not


@dataclass(frozen=True)
class PendingRound:
    """A round waiting for its decision.

    ``instance`` is the scheduler's snapshot at ``now`` (its queue is the
    round's queue, its running jobs and nodes the cluster as it is): the
    decision is judged against it. ``trigger`` is ``"period"`` or ``"event"``.
    """

    now: int
    instance: Instance
    trigger: str
    changes: Changes


@dataclass
class _State:
    """Counters the loop reads to know when nothing more can happen."""

    arrivals_left: int = 0
    repairs_left: int = 0
    completed: int = 0
    rounds: int = 0
    dirty: bool = False
    stopping: bool = False
    event_round_at: int | None = None
    period_armed: bool = False


def check_cluster(cluster: Instance) -> None:
    """That ``cluster`` carries no jobs: the trace brings them.

    Raises
    ------
    FieldError
        ``running`` (lost jobs included: a file lists them there) or ``queue``
        is not empty; the value is the job ids.
    """
    for name, jobs in (("running", cluster.running + cluster.lost), ("queue", cluster.queue)):
        if jobs:
            raise FieldError(
                name,
                [job.id for job in jobs],
                "must be empty: a cluster for simulate brings no jobs (the trace does)",
            )


class EventLoop:
    """One replay of ``trace`` on ``cluster`` under ``config``, a round at a time.

    Parameters
    ----------
    trace, cluster, config
        The jobs, the cluster (no queued or running jobs) and the run settings.
    policy
        The policy the scheduler holds (default: ``config.policy`` from the
        registry). :meth:`apply` takes any decision; this one is what
        ``scheduler.propose`` answers.

    Raises ValueError when the trace names GPU types the cluster lacks, the
    cluster carries jobs or an outage names unknown hardware.
    """

    def __init__(
        self,
        trace: tuple[TraceJob, ...],
        cluster: Instance,
        config: SimConfig,
        *,
        policy: SchedulingPolicy | None = None,
    ) -> None:
        try:
            check_cluster(cluster)
        except FieldError as exc:
            raise ValueError(f"cluster {cluster.name!r}: {exc}") from None
        if policy is not None and not (
            isinstance(getattr(policy, "name", None), str)
            and callable(getattr(policy, "decide", None))
        ):
            raise TypeError(f"a policy has a name and decide(instance, options), not {policy!r}")
        # Nobody reads a simulated round's lower bound, and it cost ~70% of a round.
        options = SolveOptions(seed=config.seed, report_bound=False, preset=config.preset)
        if config.time_limit_s is not None:
            options = options.replace(time_limit_s=config.time_limit_s)
        self.cluster = cluster
        self.config = config
        self.scheduler = Scheduler(
            cluster,
            config.policy if policy is None else policy,
            options=options,
            checkpoint_interval_s=config.checkpoint_interval_s,
            carry_plan=config.carry_plan,
        )
        self.jobs = job_runs(trace, cluster, config)
        self.eligible = {job_id: eligible_types(run, cluster) for job_id, run in self.jobs.items()}
        self.record = RunRecord(
            policy=config.policy if policy is None else policy.name,
            cluster=cluster,
            config=config,
            jobs=self.jobs,
            guarantees={
                name: tenant.guaranteed_gpus
                for name, tenant in sorted(cluster.tenants.items())
                if tenant.guaranteed_gpus
            },
        )
        self.heap: list[tuple[int, int, int, Any]] = []
        self.seq = 0
        self.now = 0
        self.state = _State()
        self.failure_rng = np.random.default_rng([config.seed, 1])
        self.attempts = Attempts(cluster, self.record, config.checkpoint_interval_s)
        self.hardware = Hardware(cluster, self.scheduler)
        self.done = False
        self._changes: dict[str, list[str]] = {f.name: [] for f in fields(Changes)}
        self._pending: PendingRound | None = None
        self._tic = 0.0  # when the pending round's snapshot began
        self._seed_events()

    # -- the two calls a driver makes ------------------------------------------------

    def advance(self) -> PendingRound | None:
        """Process events up to the next round that has something to decide.

        Returns that round, or None once the run is over (every job done,
        nothing more can happen, or ``end_s`` / ``max_rounds`` reached); the
        record is then complete, and later calls return None again. Raises
        RuntimeError while a round still waits for :meth:`apply`.
        """
        if self._pending is not None:
            raise RuntimeError(f"the round at t={self.now} waits for apply(decision)")
        if self.done:
            return None
        handlers: dict[int, Callable[[Any], None]] = {
            COMPLETE: self._complete,
            REPAIR: self._repair,
            FAIL: self._fail,
            ARRIVE: self._arrive,
        }
        end_s = self.config.end_s
        while self.heap and not self.state.stopping:
            at, kind, _, payload = heapq.heappop(self.heap)
            if end_s is not None and at > end_s:
                self.now = end_s
                break
            self.now = at
            if kind != ROUND:
                handlers[kind](payload)
            elif self._round_due(payload):
                self._tic = time.perf_counter()
                changes = Changes(**{name: tuple(ids) for name, ids in self._changes.items()})
                for ids in self._changes.values():
                    ids.clear()
                instance = self.scheduler.snapshot(self.now)
                self._pending = PendingRound(self.now, instance, payload, changes)
                return self._pending
            else:
                self.state.stopping = self._should_stop()
        self._close()
        return None

    def apply(self, decision: Decision, *, check_rules: bool | None = None) -> None:
        """Carry out the pending round's decision: preempt, then start its jobs.

        With ``check_rules`` (default ``config.check_decisions``) the decision
        is first checked against the round's instance; a violation raises
        :class:`DecisionError` and changes nothing (the round still waits).
        Raises RuntimeError when no round is pending. The round's wall time
        runs from its snapshot to this call, plus the scheduler's ``apply``.
        """
        pending = self._pending
        if pending is None:
            raise RuntimeError("no round is pending: call advance() first")
        wall = time.perf_counter() - self._tic  # snapshot and decision
        if self.config.check_decisions if check_rules is None else check_rules:
            violations = check(pending.instance, decision)
            if violations:
                raise DecisionError(self.now, violations)
        self._pending = None
        kept: dict[str, float] = {}
        for item in decision.by_action(Action.PREEMPT):
            kept[item.id] = self.attempts.interrupt(item.id, "preempted", self.now)
            self.jobs[item.id].preemptions += 1
        tic = time.perf_counter()
        self.scheduler.apply(decision, self.now, kept)
        wall += time.perf_counter() - tic
        started = 0
        for item in decision.by_action(Action.START):
            end = self.attempts.start(item.id, item.gpu_ids, self.now, item.cpu_only_node)
            self.push(end, COMPLETE, (item.id, self.jobs[item.id].attempt))
            started += 1
        if kept:  # preempted jobs wait in the queue for the next round
            self._arm_period(self.now)
            self.state.dirty = True
        self._record_round(decision, wall, started, len(kept))
        self.state.stopping = self._should_stop()

    @property
    def completed(self) -> int:
        """Jobs completed so far."""
        return self.state.completed

    # -- setup and end ----------------------------------------------------------------

    def push(self, at: int, kind: int, payload: Any = None) -> None:
        """Schedule an event."""
        heapq.heappush(self.heap, (at, kind, self.seq, payload))
        self.seq += 1

    def _seed_events(self) -> None:
        for run in sorted(self.jobs.values(), key=lambda r: r.trace.submit_s):
            self.push(run.trace.submit_s, ARRIVE, run.trace.id)
        self.state.arrivals_left = len(self.jobs)
        for outage in self.config.outages:
            self.hardware.check(outage)
            self.push(outage.at_s, FAIL, (outage, False))
        if self.config.mtbf_node_s is not None:
            for node in self.cluster.nodes:
                if not node.down:
                    self._next_failure(node.id, 0)
        if self.jobs:
            self._arm_period(min(run.trace.submit_s for run in self.jobs.values()))

    def _next_failure(self, node_id: str, after: int) -> None:
        assert self.config.mtbf_node_s is not None
        gap = 1 + int(self.failure_rng.exponential(self.config.mtbf_node_s))
        self.push(after + gap, FAIL, (Outage(node_id, after + gap, self.config.repair_s), True))

    def _should_stop(self) -> bool:
        """After a round: every job done, nothing more can happen, or out of rounds."""
        max_rounds = self.config.max_rounds
        if max_rounds is not None and self.state.rounds >= max_rounds:
            return True
        if self.state.arrivals_left or self.scheduler.running:
            return False
        return not self.scheduler.queue or self.state.repairs_left == 0

    def _close(self) -> None:
        """The run ends at ``now``: fill in the record's end."""
        self.attempts.close(self.now)
        self.record.end_s = self.now
        self.record.running_at_end = frozenset(self.scheduler.running)
        self.record.queued_at_end = frozenset(self.scheduler.queue)
        self.done = True

    def _arm_period(self, after: int) -> None:
        """The next periodic round, at the first multiple of the period from ``after``.

        A periodic round that finds nothing changed does not arm the next one:
        every round until the next change would be skipped as well. So a quiet
        stretch (one job running for years) costs one event, not one per period.
        """
        period = self.config.round_period_s
        if period is not None and not self.state.period_armed:
            self.push(math.ceil(after / period) * period, ROUND, "period")
            self.state.period_armed = True

    def _changed(self) -> None:
        """Something happened: the next round must run (now, on events)."""
        self._arm_period(self.now)
        self.state.dirty = True
        if self.config.round_on_events and self.state.event_round_at is None:
            at = self.now + self.config.round_batch_s
            self.state.event_round_at = at
            self.push(at, ROUND, "event")

    def _round_due(self, trigger: str) -> bool:
        """A round event: whether it has anything to decide (the state changed)."""
        if trigger == "period":
            assert self.config.round_period_s is not None
            self.state.period_armed = False
            if self.state.dirty:
                self._arm_period(self.now + self.config.round_period_s)
        if self.state.event_round_at == self.now:
            self.state.event_round_at = None
        if not self.state.dirty:
            return False  # nothing changed since the last round: it would decide the same
        self.state.dirty = False
        self.state.rounds += 1
        return True

    # -- events -------------------------------------------------------------------

    def _arrive(self, job_id: str) -> None:
        run = self.jobs[job_id]
        self.scheduler.submit(run.trace.queued(run.estimate_s), checkpoint_s=run.trace.checkpoint_s)
        run.arrived = True
        self.state.arrivals_left -= 1
        self._changes["arrived"].append(job_id)
        self._changed()

    def _complete(self, payload: tuple[str, int]) -> None:
        job_id, attempt = payload
        if not self.attempts.complete(job_id, attempt, self.now):
            return  # cancelled: the job failed or was preempted meanwhile
        self.scheduler.finish(job_id)
        self.state.completed += 1
        self._changes["completed"].append(job_id)
        self._changed()

    def _fail(self, payload: tuple[Outage, bool]) -> None:
        outage = payload[0]
        out, lost = self.hardware.fail(outage)
        for job_id in lost:
            kept = self.attempts.interrupt(job_id, "failed", self.now)
            self.jobs[job_id].failures += 1
            self.scheduler.requeue(job_id, kept, self.now)
            self._changes["failed"].append(job_id)
        self.state.repairs_left += 1
        self.push(self.now + outage.repair_s, REPAIR, payload)
        if out is not None:
            self._hardware_changed(out)

    def _repair(self, payload: tuple[Outage, bool]) -> None:
        outage, from_model = payload
        self.state.repairs_left -= 1
        back = self.hardware.repair(outage)
        if back is not None:
            self._hardware_changed(back)
        if from_model:
            self._next_failure(outage.node, self.now)

    def _hardware_changed(self, name: str) -> None:
        self._changes["hardware"].append(name)
        self._changed()

    # -- the rounds table -------------------------------------------------------------

    def _record_round(self, decision: Decision, wall: float, started: int, preempted: int) -> None:
        scheduler = self.scheduler
        row = {
            "time_s": self.now,
            "queued": len(scheduler.queue),
            "running": len(scheduler.running),
            **self.attempts.gpu_columns(scheduler.node_records(), scheduler.queue, self.eligible),
            "started": started,
            "preempted": preempted,
            "round_wall_s": wall,
            "solver_wall_s": decision.wall_s,
            "status": decision.status.value,
        }
        self.record.add_round(
            row,
            ((held.job.tenant, len(held.gpus)) for held in scheduler.running.values()),
            ((job.tenant, job.gpu_count) for job in scheduler.queue.values()),
        )
