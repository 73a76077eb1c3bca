"""The GPUs jobs really hold: attempts started, interrupted and completed.

The scheduler plans with estimates; :class:`Attempts` knows what each attempt
really takes (:class:`~whale_opt.sim.jobs.JobRun`), which node's GPUs it
holds, and writes the run record's segment row of every attempt as it ends.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from whale_opt.memo import IdentityMemo
from whale_opt.problem_data import Instance, Node, QueuedJob
from whale_opt.sim.jobs import full_run_s
from whale_opt.sim.record import RunRecord


class Attempts:
    """The attempts of ``record.jobs`` on ``cluster`` (checkpoints every
    ``checkpoint_interval_s`` seconds of computing; None: none)."""

    def __init__(
        self, cluster: Instance, record: RunRecord, checkpoint_interval_s: int | None
    ) -> None:
        self.cluster = cluster
        self.record = record
        self.jobs = record.jobs
        self.checkpoint_interval_s = checkpoint_interval_s
        self.node_type = {node.id: node.gpu_type for node in cluster.nodes}
        self.busy_on: dict[str, int] = defaultdict(int)  # node -> GPUs held
        self._holders: dict[str, int] = defaultdict(int)  # GPU -> jobs on it (shares: several)
        # The node tuple's arrays (ids, healthy GPUs, sizes, types): the same tuple
        # while no node record changed, so they are not rebuilt every round.
        self._arrays: IdentityMemo[_NodeArrays] = IdentityMemo(2)

    def start(self, job_id: str, gpus: tuple[str, ...], now: int, node: str | None = None) -> int:
        """Start ``job_id``'s next attempt on ``gpus`` (a CPU-only job: on ``node``);
        returns when it will complete."""
        run = self.jobs[job_id]
        run.gpus = gpus
        run.gpu_type = self.node_type[gpus[0].rpartition("/")[0] if gpus else str(node)]
        run.started_at = now
        run.restore_s, run.restore_due = run.restore_due, 0
        run.run_s = run.restore_s + max(
            1, math.ceil(run.remaining * full_run_s(run, self.cluster, run.gpu_type) - 1e-9)
        )
        if run.first_start is None:
            run.first_start = now
        for gpu in gpus:
            self._holders[gpu] += 1
            if self._holders[gpu] == 1:  # a GPU shared by several jobs is busy once
                self.busy_on[gpu.rpartition("/")[0]] += 1
        return now + run.run_s

    def complete(self, job_id: str, attempt: int, now: int) -> bool:
        """Attempt ``attempt`` of ``job_id`` ends at ``now``, the job done; False
        when that attempt was cancelled meanwhile (failed or preempted)."""
        run = self.jobs[job_id]
        if run.attempt != attempt or run.started_at is None:
            return False
        overhead = run.close(now)
        self.record.add_segment(run, "completed", now, run.run_s - overhead, overhead=overhead)
        run.remaining = 0.0
        run.end = now
        self._release(job_id)
        return True

    def interrupt(self, job_id: str, outcome: str, now: int) -> float:
        """Stop a running job (see :meth:`JobRun.interrupt`); return the share of
        this attempt's work still to do."""
        run = self.jobs[job_id]
        after = run.restored_after  # the cause of this attempt's restore, before it changes
        stop = run.interrupt(now, self.checkpoint_interval_s, outcome)
        self.record.add_segment(
            run, outcome, now, stop.saved_s, overhead=stop.overhead_s, lost=stop.lost_s, after=after
        )
        self._release(job_id)
        return stop.left

    def close(self, now: int) -> None:
        """The run ends at ``now``: jobs still running count their time so far."""
        for run in self.jobs.values():
            if run.started_at is not None:
                overhead = run.close(now)
                self.record.add_segment(
                    run, "running", now, now - run.started_at - overhead, overhead=overhead
                )

    def _release(self, job_id: str) -> None:
        run = self.jobs[job_id]
        for gpu in run.gpus:
            self._holders[gpu] -= 1
            if self._holders[gpu] == 0:
                self.busy_on[gpu.rpartition("/")[0]] -= 1
        run.attempt += 1
        run.started_at = None

    def gpu_columns(
        self,
        nodes: tuple[Node, ...],
        queue: Mapping[str, QueuedJob],
        eligible: Mapping[str, frozenset[str]],
    ) -> dict[str, int]:
        """The rounds table's GPU counts: busy, healthy, free and fragmented.

        A free GPU is fragmented when its node has fewer free GPUs than the
        smallest queued job that may use its type needs (a whole node for
        larger gangs); ``eligible`` gives each job's GPU types.
        """
        arrays = self._arrays.get(nodes, lambda: _NodeArrays(nodes))
        busy_on = self.busy_on
        busy = np.fromiter((busy_on.get(i, 0) for i in arrays.ids), np.int64, len(arrays.ids))
        free = arrays.healthy - busy
        least: dict[str, int] = {}  # the fewest GPUs a queued job of each type needs
        for job_id, job in queue.items():
            for name in eligible[job_id]:
                least[name] = min(least.get(name, job.gpu_count), job.gpu_count)
        need = np.array([least.get(name, 0) for name in arrays.types], dtype=np.int64)
        fragmented = (free > 0) & (free < np.minimum(need[arrays.type_of], arrays.size))
        healthy = int(arrays.healthy.sum())
        held = int(busy.sum())
        return {
            "busy_gpus": held,
            "healthy_gpus": healthy,
            "free_gpus": healthy - held,
            "fragmented_gpus": int(free[fragmented].sum()),
        }


class _NodeArrays:
    """A node tuple's ids, healthy GPUs, sizes and GPU types (as positions in ``types``)."""

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.ids = [node.id for node in nodes]
        self.healthy = np.array([len(node.healthy_indices) for node in nodes], dtype=np.int64)
        self.size = np.array([node.gpu_count for node in nodes], dtype=np.int64)
        self.types = {name: k for k, name in enumerate(dict.fromkeys(n.gpu_type for n in nodes))}
        self.type_of = np.array([self.types[node.gpu_type] for node in nodes], dtype=np.int64)
