"""Discrete-event replay of a job trace on a cluster, through the public round API.

:func:`simulate` runs the event loop (:class:`~whale_opt.sim.engine.EventLoop`,
where events, failures and attempts are handled) to its end, each round
decided by the scheduler's policy, and measures the run from its record
(:func:`~whale_opt.sim.metrics.build_result`).

On a cluster past the scheduler's ``split_above_gpus``, where every round is
split into pools (see :func:`whale_opt.solve.solve`), the pools are solved
on one executor for the whole run, not on processes made per round: for
``cpsat``, whose pools take their share of the time limit,
:data:`~whale_opt.solve.LOCAL_WORKERS` local processes that live as long as
the run; for the heuristics, whose pools take no time limit, the round's own
process (:class:`~whale_opt.executors.InlineExecutor`), which decides the
same without sending the pools anywhere. Such a round is decided as
``scheduler.propose`` decides it, with that executor; every other round is
``scheduler.propose``'s.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor

from whale_opt.decision import Decision
from whale_opt.executors import InlineExecutor, LocalExecutor
from whale_opt.policies import SchedulingPolicy
from whale_opt.problem_data import Instance
from whale_opt.sim.config import SimConfig
from whale_opt.sim.engine import EventLoop, PendingRound
from whale_opt.sim.metrics import SimResult, build_result
from whale_opt.sim.trace import TraceJob
from whale_opt.solve import LOCAL_WORKERS, solve

TIME_LIMITED = frozenset({"cpsat"})  # policies whose pools use their share of the limit
# Objects allocated between cyclic-garbage collections during a replay (Python's
# default is 700): a round builds and drops thousands of short-lived records, and
# each young collection triggered that often also advances the older ones, which
# walk every long-lived object of the run (the trace, the cluster, the record).
# At 700 collecting took about 45% of an openb replay; decisions do not depend on it.
REPLAY_GC_THRESHOLD = 50_000


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage every :data:`REPLAY_GC_THRESHOLD` allocations; then restore."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], REPLAY_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


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
        self._pools: Executor | None = None  # made with the first split round
        cut = self.loop.scheduler.split_above_gpus
        self._large = cut is not None and sum(n.gpu_count for n in cluster.nodes) > cut

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Replay until every job is done, nothing more can happen, or a limit is hit."""
        started = time.perf_counter()
        loop = self.loop
        reported = 0
        try:
            with _fewer_collections():
                while (pending := loop.advance()) is not None:
                    loop.apply(self.propose(pending))
                    if progress is not None and loop.completed != reported:
                        reported = loop.completed  # completions happen between rounds
                        progress(reported)
        finally:
            if self._pools is not None:
                self._pools.shutdown()
                self._pools = None
        return build_result(loop.record, time.perf_counter() - started)

    def propose(self, pending: PendingRound) -> Decision:
        """The scheduler's decision for ``pending`` (as ``scheduler.propose``), with
        split rounds solved on the run's executor."""
        scheduler = self.loop.scheduler
        if scheduler.solver is None or not self._large:
            return scheduler.propose(pending.now, pending.instance)
        return solve(
            pending.instance,
            scheduler.solver,
            scheduler.round_options(),
            split_above_gpus=scheduler.split_above_gpus,
            policy=scheduler.policy,
            executor=self.pools,
        )

    @property
    def pools(self) -> Executor:
        """The executor of the run's split rounds (made when first asked for)."""
        if self._pools is None:
            solver = self.loop.scheduler.solver
            timed = solver in TIME_LIMITED
            self._pools = LocalExecutor(LOCAL_WORKERS) if timed else InlineExecutor(LOCAL_WORKERS)
        return self._pools


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
