"""Discrete-event replay of a job trace on a cluster, through the public round API.

Events sit in a :mod:`heapq` of ``(time, kind, seq, payload)``: at equal times
completions come first (their GPUs are free for the round), then repairs,
failures, arrivals, and last the round, which sees everything of its second.
``seq`` breaks ties in push order, so a run is a pure function of its inputs
and seed. A cancelled completion (its job failed or was preempted) is left in
the heap and ignored when popped: its attempt number is stale.

Why a plain heap and not SimPy: every actor here is a one-shot callback
(a job ends, a node fails, a round runs), never a process that waits halfway;
SimPy would wrap each in a generator and an Event object and add its own heap
on top, for no expressiveness we use. The heap is ~60 lines, costs a tuple
per event, has no dependency and makes the tie-break order explicit, which the
determinism invariant needs. Simulated time is integer seconds; the time a
round takes to decide is measured, reported, and not charged to the
simulated clock (the decision applies at the round's second).

The simulator drives only :class:`~whale_opt.scheduler.Scheduler`: ``submit``
on arrival, ``finish`` on completion, ``set_node_down`` / ``fail_gpu`` and
``requeue`` on failures, ``drain`` on drains, ``propose`` and ``apply`` per
round. The scheduler sees estimated durations only; actual ones stay here.
It is told the same checkpoint interval and restore times the simulator
runs, so the price it puts on a preemption (work since the last checkpoint
plus the restore) is what the preemption then costs here; the share of work
a preempted or failed job keeps is the simulator's (actual) one.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from whale_opt.check import Violation, check
from whale_opt.decision import Action, Decision
from whale_opt.problem_data import Instance
from whale_opt.scheduler import Scheduler
from whale_opt.sim.config import Outage, SimConfig
from whale_opt.sim.groups import tenant_columns
from whale_opt.sim.jobs import JobRun, eligible_types, full_run_s, job_runs
from whale_opt.sim.metrics import SimResult, build_result
from whale_opt.sim.trace import TraceJob

log = logging.getLogger("whale_opt")

COMPLETE, REPAIR, FAIL, ARRIVE, ROUND = range(5)


class DecisionError(RuntimeError):
    """A round's decision broke the checker's rules (``check_decisions`` on)."""

    def __init__(self, at: int, violations: list[Violation]) -> None:
        self.at = at
        self.violations = violations
        listed = "; ".join(str(v) for v in violations[:5])
        super().__init__(f"round at t={at}: {len(violations)} violation(s): {listed}")


@dataclass
class _State:
    """Counters the loop reads to know when nothing more can happen."""

    arrivals_left: int = 0
    repairs_left: int = 0
    completed: int = 0
    rounds: int = 0
    dirty: bool = False
    event_round_at: int | None = None
    node_down: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    gpu_down: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    draining: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Simulator:
    """One replay of ``trace`` on ``cluster`` under ``config`` (see :func:`simulate`)."""

    def __init__(self, trace: tuple[TraceJob, ...], cluster: Instance, config: SimConfig) -> None:
        if cluster.queue or cluster.running:
            raise ValueError(
                f"cluster {cluster.name!r} has queued or running jobs; a cluster for "
                "simulate has an empty queue and running list (the trace brings the jobs)"
            )
        # Nobody reads a simulated round's lower bound, and it cost ~70% of a round.
        policy = replace(cluster.policy, seed=config.seed, report_bound=False)
        if config.time_limit_s is not None:
            policy = replace(policy, time_limit_s=config.time_limit_s)
        self.cluster = cluster.replace(policy=policy)
        self.config = config
        self.scheduler = Scheduler(
            self.cluster,
            config.policy,
            preset=config.preset,
            checkpoint_interval_s=config.checkpoint_interval_s,
        )
        self.guarantees = {
            name: tenant.guaranteed_gpus
            for name, tenant in sorted(cluster.tenants.items())
            if tenant.guaranteed_gpus
        }
        self.node_type = {node.id: node.gpu_type for node in cluster.nodes}
        self.node_gpus = {node.id: node.gpus for node in cluster.nodes}
        self.jobs = job_runs(trace, self.cluster, config)
        self.eligible = {
            job_id: eligible_types(run, self.cluster) for job_id, run in self.jobs.items()
        }
        self.heap: list[tuple[int, int, int, Any]] = []
        self.seq = 0
        self.now = 0
        self.state = _State()
        self.failure_rng = np.random.default_rng([config.seed, 1])
        self.segments: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.busy_on: dict[str, int] = defaultdict(int)  # node -> GPUs held

    # -- setup --------------------------------------------------------------------

    def push(self, at: int, kind: int, payload: Any = None) -> None:
        """Schedule an event."""
        heapq.heappush(self.heap, (at, kind, self.seq, payload))
        self.seq += 1

    def _seed_events(self) -> None:
        for run in sorted(self.jobs.values(), key=lambda r: r.trace.submit_s):
            self.push(run.trace.submit_s, ARRIVE, run.trace.id)
        self.state.arrivals_left = len(self.jobs)
        for node in self.cluster.nodes:
            if node.down:
                self.state.node_down[node.id] = 1  # down in the cluster file: stays down
            for index in node.failed_gpus:
                self.state.gpu_down[node.gpu_id(index)] = 1
        for outage in self.config.outages:
            if outage.node not in self.node_type:
                raise ValueError(f"outage names unknown node {outage.node!r}")
            if outage.gpu is not None and outage.gpu >= self.node_gpus[outage.node]:
                raise ValueError(f"outage names GPU {outage.gpu} of {outage.node}: out of range")
            self.push(outage.at_s, FAIL, (outage, False))
        if self.config.mtbf_node_s is not None:
            for node in self.cluster.nodes:
                if not node.down:
                    self._next_failure(node.id, 0)
        if self.config.round_period_s is not None and self.jobs:
            first = min(run.trace.submit_s for run in self.jobs.values())
            period = self.config.round_period_s
            self.push(math.ceil(first / period) * period, ROUND, "period")

    def _next_failure(self, node_id: str, after: int) -> None:
        assert self.config.mtbf_node_s is not None
        gap = 1 + int(self.failure_rng.exponential(self.config.mtbf_node_s))
        self.push(after + gap, FAIL, (Outage(node_id, after + gap, self.config.repair_s), True))

    # -- the loop -----------------------------------------------------------------

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Replay until every job is done, nothing more can happen, or a limit is hit."""
        started = time.perf_counter()
        self._seed_events()
        end_s, max_rounds = self.config.end_s, self.config.max_rounds
        handlers: dict[int, Callable[[Any], None]] = {
            COMPLETE: self._complete,
            REPAIR: self._repair,
            FAIL: self._fail,
            ARRIVE: self._arrive,
        }
        reported = 0
        while self.heap:
            at, kind, _, payload = heapq.heappop(self.heap)
            if end_s is not None and at > end_s:
                self.now = end_s
                break
            self.now = at
            if kind != ROUND:
                handlers[kind](payload)
                continue
            self._round(payload)
            if progress is not None and self.state.completed != reported:
                reported = self.state.completed  # completions happen between rounds
                progress(reported)
            if self._finished() or (max_rounds is not None and self.state.rounds >= max_rounds):
                break
        for run in self.jobs.values():  # still running at the end: its time so far
            if run.started_at is not None:
                overhead = run.close(self.now)
                self._segment(
                    run, "running", self.now - run.started_at - overhead, overhead=overhead
                )
        return build_result(self, time.perf_counter() - started)

    def _finished(self) -> bool:
        if self.state.arrivals_left or self.scheduler.running:
            return False
        return not self.scheduler.queue or self.state.repairs_left == 0

    def _changed(self) -> None:
        """Something happened: the next round must run (now, on events)."""
        self.state.dirty = True
        if self.config.round_on_events and self.state.event_round_at is None:
            at = self.now + self.config.round_batch_s
            self.state.event_round_at = at
            self.push(at, ROUND, "event")

    # -- events -------------------------------------------------------------------

    def _arrive(self, job_id: str) -> None:
        run = self.jobs[job_id]
        self.scheduler.submit(run.trace.queued(run.estimate_s), checkpoint_s=run.trace.checkpoint_s)
        run.arrived = True
        self.state.arrivals_left -= 1
        self._changed()

    def _complete(self, payload: tuple[str, int]) -> None:
        job_id, attempt = payload
        run = self.jobs[job_id]
        if run.attempt != attempt or run.started_at is None:
            return  # cancelled: the job failed or was preempted meanwhile
        overhead = run.close(self.now)
        self._segment(run, "completed", run.run_s - overhead, overhead=overhead)
        run.remaining = 0.0
        run.end = self.now
        self._release(run)
        self.scheduler.finish(job_id)
        self.state.completed += 1
        self._changed()

    def _fail(self, payload: tuple[Outage, bool]) -> None:
        outage = payload[0]
        if outage.kind == "drain":
            self.state.draining[outage.node] += 1
            if self.state.draining[outage.node] == 1:
                self.scheduler.drain(outage.node)
                self._changed()
            self.state.repairs_left += 1
            self.push(self.now + outage.repair_s, REPAIR, payload)
            return
        if outage.gpu is None:
            self.state.node_down[outage.node] += 1
            first = self.state.node_down[outage.node] == 1
            lost = self.scheduler.set_node_down(outage.node) if first else []
        else:
            gpu_id = f"{outage.node}/{outage.gpu}"
            self.state.gpu_down[gpu_id] += 1
            first = self.state.gpu_down[gpu_id] == 1
            lost = self.scheduler.fail_gpu(gpu_id) if first else []
        for job_id in lost:
            run = self.jobs[job_id]
            kept = self._interrupt(run, "failed")
            run.failures += 1
            self.scheduler.requeue(job_id, kept, self.now)
        self.state.repairs_left += 1
        self.push(self.now + outage.repair_s, REPAIR, payload)
        if first:
            self._changed()

    def _repair(self, payload: tuple[Outage, bool]) -> None:
        outage, from_model = payload
        self.state.repairs_left -= 1
        if outage.kind == "drain":
            self.state.draining[outage.node] -= 1
            if self.state.draining[outage.node] == 0:
                self.scheduler.drain(outage.node, draining=False)
                self._changed()
            return
        if outage.gpu is None:
            self.state.node_down[outage.node] -= 1
            if self.state.node_down[outage.node] == 0:
                self.scheduler.set_node_down(outage.node, down=False)
                self._changed()
        else:
            gpu_id = f"{outage.node}/{outage.gpu}"
            self.state.gpu_down[gpu_id] -= 1
            if self.state.gpu_down[gpu_id] == 0:
                self.scheduler.fail_gpu(gpu_id, failed=False)
                self._changed()
        if from_model:
            self._next_failure(outage.node, self.now)

    def _interrupt(self, run: JobRun, outcome: str) -> float:
        """Stop a running job (see :meth:`JobRun.interrupt`); return the share of
        this attempt's work still to do."""
        after = run.restored_after  # the cause of this attempt's restore, before it changes
        stop = run.interrupt(self.now, self.config.checkpoint_interval_s, outcome)
        self._segment(
            run, outcome, stop.saved_s, overhead=stop.overhead_s, lost=stop.lost_s, after=after
        )
        self._release(run)
        return stop.left

    def _segment(
        self,
        run: JobRun,
        outcome: str,
        useful_s: int,
        *,
        overhead: int = 0,
        lost: int = 0,
        after: str | None = None,
    ) -> None:
        """One attempt's row: ``useful_s`` of kept computing, ``overhead`` seconds of
        restore charged to the interruption before it (``after``, default the
        job's last), ``lost`` to its own end."""
        assert run.started_at is not None
        after = run.restored_after if after is None else after
        self.segments.append(
            {
                "job": run.trace.id,
                "start_s": run.started_at,
                "end_s": self.now,
                "gpus": run.gpus,
                "gpu_type": run.gpu_type,
                "outcome": outcome,
                "useful_s": useful_s,
                "full_s": full_run_s(run, self.cluster, run.gpu_type),
                "restore_s": min(run.restore_s, self.now - run.started_at),
                "overhead_s": overhead,
                "lost_s": lost,
                "restored_after": after if run.restore_s else "",
            }
        )

    def _release(self, run: JobRun) -> None:
        for gpu in run.gpus:
            self.busy_on[gpu.rpartition("/")[0]] -= 1
        run.attempt += 1
        run.started_at = None

    def _start(self, job_id: str, gpus: tuple[str, ...]) -> None:
        run = self.jobs[job_id]
        run.gpus = gpus
        run.gpu_type = self.node_type[gpus[0].rpartition("/")[0]]
        run.started_at = self.now
        run.restore_s, run.restore_due = run.restore_due, 0
        run.run_s = run.restore_s + max(
            1, math.ceil(run.remaining * full_run_s(run, self.cluster, run.gpu_type) - 1e-9)
        )
        if run.first_start is None:
            run.first_start = self.now
        for gpu in gpus:
            self.busy_on[gpu.rpartition("/")[0]] += 1
        self.push(self.now + run.run_s, COMPLETE, (job_id, run.attempt))

    # -- rounds -------------------------------------------------------------------

    def _round(self, kind: str) -> None:
        if kind == "period":
            assert self.config.round_period_s is not None
            self.push(self.now + self.config.round_period_s, ROUND, "period")
        if self.state.event_round_at == self.now:
            self.state.event_round_at = None
        if not self.state.dirty:
            return  # nothing changed since the last round: it would decide the same
        self.state.dirty = False
        self.state.rounds += 1
        tic = time.perf_counter()
        instance = self.scheduler.snapshot(self.now)
        decision = self.scheduler.propose(self.now, instance)
        wall = time.perf_counter() - tic
        if self.config.check_decisions:
            violations = check(instance, decision)
            if violations:
                raise DecisionError(self.now, violations)
        kept: dict[str, float] = {}
        for item in decision.by_action(Action.PREEMPT):
            run = self.jobs[item.id]
            kept[item.id] = self._interrupt(run, "preempted")
            run.preemptions += 1
        tic = time.perf_counter()
        self.scheduler.apply(decision, self.now, kept)
        wall += time.perf_counter() - tic
        started = 0
        for item in decision.by_action(Action.START):
            self._start(item.id, item.gpus)
            started += 1
        if kept:
            self.state.dirty = True  # preempted jobs wait in the queue for the next round
        self._record_round(decision, wall, started, len(kept))

    def _record_round(self, decision: Decision, wall: float, started: int, preempted: int) -> None:
        nodes = self.scheduler.nodes.values()
        healthy = sum(len(node.healthy_indices) for node in nodes)
        busy = sum(self.busy_on.values())
        need: dict[str, int] = {}
        for job_id, job in self.scheduler.queue.items():
            for name in self.eligible[job_id]:
                need[name] = min(need.get(name, job.gpus), job.gpus)
        fragmented = 0
        for node in nodes:  # free GPUs too few, on their node, for any job that may use them
            free = len(node.healthy_indices) - self.busy_on[node.id]
            if free > 0 and node.gpu_type in need and free < min(need[node.gpu_type], node.gpus):
                fragmented += free
        tenants = self._tenant_columns()
        self.rounds.append(
            {
                "time_s": self.now,
                "queued": len(self.scheduler.queue),
                "running": len(self.scheduler.running),
                "busy_gpus": busy,
                "healthy_gpus": healthy,
                "free_gpus": healthy - busy,
                "fragmented_gpus": fragmented,
                "started": started,
                "preempted": preempted,
                "round_wall_s": wall,
                "solver_wall_s": decision.wall_s,
                "status": decision.status.value,
                **tenants,
            }
        )

    def _tenant_columns(self) -> dict[str, int]:
        """Per tenant with a guarantee, GPUs held and owed (:func:`tenant_columns`)."""
        if not self.guarantees:
            return {}
        return tenant_columns(
            self.guarantees,
            ((p.job.tenant, len(p.gpus)) for p in self.scheduler.running.values()),
            ((job.tenant, job.gpus) for job in self.scheduler.queue.values()),
        )


def simulate(
    trace: tuple[TraceJob, ...] | list[TraceJob],
    cluster: Instance,
    config: SimConfig | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config`` and measure the run.

    ``progress(completed_jobs)`` is called after rounds that follow completions.
    Raises ValueError when the trace names GPU types the cluster lacks or the
    cluster carries jobs, and :class:`DecisionError` when ``check_decisions``
    is on and a round breaks a rule.
    """
    return Simulator(tuple(trace), cluster, config or SimConfig()).run(progress)
