"""Discrete-event replay of a job trace on a cluster, through the public round API.

:func:`simulate` runs the event loop (:class:`~whale_opt.sim.engine.EventLoop`,
where events, failures and attempts are handled) to its end, each round
decided by the scheduler's policy, and measures the run from its record
(:func:`~whale_opt.sim.metrics.build_result`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from whale_opt.policies import SchedulingPolicy
from whale_opt.problem_data import Instance
from whale_opt.sim.config import SimConfig
from whale_opt.sim.engine import EventLoop
from whale_opt.sim.metrics import SimResult, build_result
from whale_opt.sim.trace import TraceJob


class Simulator:
    """One replay of ``trace`` on ``cluster`` under ``config`` (see :func:`simulate`)."""

    def __init__(
        self,
        trace: tuple[TraceJob, ...],
        cluster: Instance,
        config: SimConfig,
        *,
        policy: SchedulingPolicy | None = None,
    ) -> None:
        self.loop = EventLoop(trace, cluster, config, policy=policy)

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Replay until every job is done, nothing more can happen, or a limit is hit."""
        started = time.perf_counter()
        loop, scheduler = self.loop, self.loop.scheduler
        reported = 0
        while (pending := loop.advance()) is not None:
            loop.apply(scheduler.propose(pending.now, pending.instance))
            if progress is not None and loop.completed != reported:
                reported = loop.completed  # completions happen between rounds
                progress(reported)
        return build_result(loop.record, time.perf_counter() - started)


def simulate(
    trace: tuple[TraceJob, ...] | list[TraceJob],
    cluster: Instance,
    config: SimConfig | None = None,
    *,
    policy: SchedulingPolicy | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config`` and measure the run.

    ``policy`` decides every round instead of the registry's ``config.policy``:
    any object with a ``name`` and ``decide(instance, options)`` (the
    :class:`~whale_opt.policies.SchedulingPolicy` shape); the result carries
    its name. ``progress(completed_jobs)`` is called after rounds that follow
    completions. Raises ValueError when the trace names GPU types the cluster
    lacks or the cluster carries jobs, TypeError when ``policy`` lacks that
    shape, and :class:`~whale_opt.sim.engine.DecisionError` when
    ``check_decisions`` is on and a round breaks a rule.
    """
    return Simulator(tuple(trace), cluster, config or SimConfig(), policy=policy).run(progress)
