"""What a run leaves behind for its metrics: one record the event loop fills.

:class:`RunRecord` is all that :mod:`whale_opt.sim.metrics` reads: the
per-job knowledge of the run (:class:`~whale_opt.sim.jobs.JobRun`: times,
attempts, losses), one row per attempt (``segments``), one row per round
(``rounds``, with the per-tenant columns of :func:`~whale_opt.sim.groups.tenant_columns`),
and, once the run ends, its last second and which jobs the scheduler still
held as running or queued. The loop (:class:`~whale_opt.sim.engine.EventLoop`)
writes it; the metrics never see the loop or the scheduler, so ``sim/`` has
no import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from whale_opt.problem_data import MILLI, Instance
from whale_opt.sim.config import SimConfig
from whale_opt.sim.groups import tenant_columns
from whale_opt.sim.jobs import JobRun, full_run_s


@dataclass
class RunRecord:
    """One run as the loop saw it (filled while it runs, complete once it ends).

    Parameters
    ----------
    policy
        The name of the policy that decided the rounds.
    cluster, config
        The cluster replayed on (as given, no jobs) and the run's settings.
    jobs
        Per trace job, what the simulator knows of it (actual durations, times).
    guarantees
        GPUs guaranteed per tenant, for the tenants that have a guarantee.
    segments
        One row per attempt (:data:`whale_opt.sim.metrics.SEGMENT_COLUMNS`).
    rounds
        One row per round that ran (:data:`whale_opt.sim.metrics.ROUND_COLUMNS`,
        then ``held[<tenant>]`` / ``owed[<tenant>]``).
    end_s
        The simulated second the run ended at (set when it ends).
    running_at_end, queued_at_end
        The jobs the scheduler held as running / queued when the run ended.
    """

    policy: str
    cluster: Instance
    config: SimConfig
    jobs: dict[str, JobRun]
    guarantees: dict[str, int] = field(default_factory=dict)
    segments: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    end_s: int = 0
    running_at_end: frozenset[str] = frozenset()
    queued_at_end: frozenset[str] = frozenset()

    def add_segment(
        self,
        run: JobRun,
        outcome: str,
        now: int,
        useful_s: int,
        *,
        overhead: int = 0,
        lost: int = 0,
        after: str | None = None,
    ) -> None:
        """One attempt of ``run``, ending at ``now`` with ``outcome``: ``useful_s``
        of kept computing, ``overhead`` seconds of restore charged to the
        interruption before it (``after``, default the job's last), ``lost`` to
        its own end."""
        assert run.started_at is not None
        after = run.restored_after if after is None else after
        self.segments.append(
            {
                "job": run.trace.id,
                "start_s": run.started_at,
                "end_s": now,
                "gpus": run.gpus,
                "gpu_amount": len(run.gpus) * run.trace.gpu_milli / MILLI,
                "gpu_type": run.gpu_type,
                "outcome": outcome,
                "useful_s": useful_s,
                "full_s": full_run_s(run, self.cluster, run.gpu_type),
                "restore_s": min(run.restore_s, now - run.started_at),
                "overhead_s": overhead,
                "lost_s": lost,
                "restored_after": after if run.restore_s else "",
            }
        )

    def add_round(
        self,
        row: dict[str, Any],
        running: Iterable[tuple[str, int]],
        waiting: Iterable[tuple[str, int]],
    ) -> None:
        """One round's row, then, when tenants have guarantees, the GPUs each holds
        and is owed (:func:`~whale_opt.sim.groups.tenant_columns`; ``running``,
        ``waiting``: (tenant, GPUs) per running and per queued job)."""
        if self.guarantees:
            row = {**row, **tenant_columns(self.guarantees, running, waiting)}
        self.rounds.append(row)
