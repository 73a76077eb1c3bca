"""The controller loop: read Slurm, decide with whale_opt, pin and release.

One round: ``squeue --json`` and ``sinfo --json`` -> :class:`Snapshot` ->
:func:`whale_opt.solve.solve` -> the public checker -> ``scontrol``
commands (preemptions first, then starts). Slurm holds the state: the loop
keeps none that a restart would lose, so it may be stopped and started at
will. A controller that cannot be reached makes the loop back off and retry,
with one log line per attempt; every command has a timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from whale_opt.check import check
from whale_opt.decision import Action, Decision
from whale_opt.problem_data import Policy
from whale_opt.slurm.commands import JobCommands, plan
from whale_opt.slurm.options import BridgeOptions
from whale_opt.slurm.runner import SlurmRunner, SlurmUnavailable
from whale_opt.slurm.snapshot import Snapshot, build_snapshot
from whale_opt.solve import solve

log = logging.getLogger("whale_opt")

SQUEUE = ("squeue", "--json")
SINFO = ("sinfo", "--json")
MAX_BACKOFF_S = 60.0


@dataclass
class RoundReport:
    """What one round saw and did (``dry_run``: the commands were not run)."""

    now: int
    queued: int = 0
    running: int = 0
    decision: Decision | None = None
    commands: list[JobCommands] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    dry_run: bool = False


class SlurmController:
    """Makes whale_opt the placement brain of a Slurm cluster, round by round.

    ``solver`` is a registry name (``cpsat``, ``wspt``...), ``time_limit_s``
    the round's solve limit; with ``dry_run`` the commands are planned and
    logged, never run. ``placed`` maps the jobs started by this controller to
    the GPUs whale_opt chose; ``mismatches`` lists those Slurm ran elsewhere.
    """

    def __init__(
        self,
        runner: SlurmRunner | None = None,
        options: BridgeOptions | None = None,
        *,
        solver: str = "cpsat",
        time_limit_s: float = 5.0,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
        policy: Policy | None = None,
    ) -> None:
        self.runner = runner or SlurmRunner()
        self.options = options or BridgeOptions()
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.policy = policy or Policy()
        self.dry_run = dry_run
        self.clock = clock
        self.placed: dict[str, tuple[str, ...]] = {}
        self.mismatches: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
        self._restore: dict[str, JobCommands] = {}
        self._told: set[tuple[str, str]] = set()

    # -- one round -----------------------------------------------------------

    def read(self) -> Snapshot:
        """Read Slurm now into a :class:`Snapshot`."""
        squeue = self.runner.read_json(SQUEUE)
        sinfo = self.runner.read_json(SINFO)
        return build_snapshot(squeue, sinfo, int(self.clock()), self.options, self.policy)

    def decide(self, snapshot: Snapshot) -> Decision | None:
        """whale_opt's decision for ``snapshot``; None when there is nothing to decide
        or the decision fails the checker (then nothing is done this round)."""
        instance = snapshot.instance
        if not instance.queue:
            return None  # preempting only ever serves a queued job
        decision = solve(instance, solver=self.solver, time_limit_s=self.time_limit_s)
        violations = check(instance, decision)
        if violations:
            log.error(
                "slurm: the %s decision fails the checker (%s); nothing done this round",
                self.solver,
                "; ".join(str(v) for v in violations[:3]),
            )
            return None
        return decision

    def round(self) -> RoundReport:
        """Read, decide, act once. Raises :class:`SlurmUnavailable` if Slurm is down."""
        snapshot = self.read()
        if self._restore and self._repair(snapshot):
            snapshot = self.read()
        self._verify(snapshot)
        for job_id, why in snapshot.skipped:
            if (job_id, why) not in self._told:  # once, not every round
                log.info("slurm: job %s stays held: %s", job_id, why)
        self._told = set(snapshot.skipped)
        instance = snapshot.instance
        report = RoundReport(
            now=snapshot.now,
            queued=len(instance.queue),
            running=len(instance.running),
            skipped=list(snapshot.skipped),
            dry_run=self.dry_run,
        )
        report.decision = self.decide(snapshot)
        if report.decision is None:
            return report
        report.commands, report.refused = plan(snapshot, report.decision, self.options.gres_mode)
        for job_id, why in report.refused:
            log.warning("slurm: job %s not started: %s", job_id, why)
        for item in report.commands:
            self._execute(item, report)
        return report

    def _execute(self, item: JobCommands, report: RoundReport) -> None:
        """Run one job's commands; on a failed step, undo and record the failure."""
        shown = " && ".join(" ".join(step) for step in item.steps)
        if self.dry_run:
            log.info("slurm: would run: %s", shown)
            return
        for k, step in enumerate(item.steps):
            if k > 0 and item.undo:
                self._restore[item.job_id] = item  # in case Slurm goes away mid-way
            result = self.runner.run(step)
            if not result.ok:
                log.warning(
                    "slurm: job %s: '%s' failed: %s", item.job_id, " ".join(step), result.message
                )
                for undo in item.undo if k > 0 else ():
                    self.runner.run(undo)
                self._restore.pop(item.job_id, None)
                report.failed.append((item.job_id, result.message))
                return
        self._restore.pop(item.job_id, None)
        if item.action is Action.PREEMPT:
            log.info("slurm: job %s preempted (requeued, held)", item.job_id)
            report.preempted.append(item.job_id)
            self.placed.pop(item.job_id, None)
        else:
            log.info("slurm: job %s started on %s", item.job_id, ",".join(item.gpus))
            report.started.append(item.job_id)
            self.placed[item.job_id] = item.gpus

    def _repair(self, snapshot: Snapshot) -> bool:
        """Give back the GPU request a Slurm outage left cleared mid-start; True if any.

        Such a job is still held but asks for no GPUs, so the snapshot skips it.
        """
        skipped = {job_id for job_id, _ in snapshot.skipped}
        repaired = False
        for job_id, item in list(self._restore.items()):
            if job_id in skipped:
                log.warning("slurm: job %s: restoring its GPU request (start interrupted)", job_id)
                for undo in item.undo:
                    self.runner.run(undo)
                repaired = True
            del self._restore[job_id]
        return repaired

    def _verify(self, snapshot: Snapshot) -> None:
        """Compare jobs this controller started with where Slurm runs them."""
        indexed = self.options.gres_mode == "indexed"
        for job_id, chosen in list(self.placed.items()):
            job = snapshot.jobs.get(job_id)
            if job is None or job.state != "RUNNING" or not job.nodes:
                if job is None or job.held:
                    self.placed.pop(job_id, None)  # finished, or requeued
                continue
            actual = tuple(
                f"{node}/{index}"
                for node, indices in zip(job.nodes, job.held_gpus, strict=False)
                for index in indices
            )
            same = (
                sorted(actual) == sorted(chosen)
                if indexed
                else {g.rpartition("/")[0] for g in actual}
                == {g.rpartition("/")[0] for g in chosen}
            )
            if not same:
                self.mismatches.append((job_id, chosen, actual))
                log.warning("slurm: job %s runs on %s, whale_opt chose %s", job_id, actual, chosen)
            del self.placed[job_id]

    # -- the loop ------------------------------------------------------------

    def run(
        self,
        *,
        interval_s: float = 10.0,
        once: bool = False,
        max_rounds: int | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Run rounds every ``interval_s`` until ``stop`` is set (or ``max_rounds``).

        Returns 0, or 1 when ``once`` and Slurm could not be reached. While
        the controller is down the loop waits ``interval_s``, then twice as
        long each time, up to :data:`MAX_BACKOFF_S`, logging each attempt.
        """
        stop = stop or threading.Event()
        rounds = failures = 0
        while not stop.is_set():
            try:
                report = self.round()
            except SlurmUnavailable as exc:
                if once:
                    log.error("slurm: controller unreachable: %s", exc)
                    return 1
                delay = min(MAX_BACKOFF_S, interval_s * 2**failures)
                failures += 1
                log.warning(
                    "slurm: controller unreachable (%s); retry %d in %.3g s", exc, failures, delay
                )
                stop.wait(delay)
                continue
            except ValueError as exc:  # a document or record whale_opt cannot read
                if once:
                    log.error("slurm: round skipped: %s", exc)
                    return 1
                log.error("slurm: round skipped: %s", exc)
            else:
                if failures:
                    log.info("slurm: controller reachable again after %d attempt(s)", failures)
                failures = 0
                log.info(
                    "slurm: round: %d queued, %d running, %d started, %d preempted, %d failed",
                    report.queued,
                    report.running,
                    len(report.started),
                    len(report.preempted),
                    len(report.failed),
                )
            rounds += 1
            if once or (max_rounds is not None and rounds >= max_rounds):
                return 0
            stop.wait(interval_s)
        return 0
