"""The observation: a fixed-size float vector of nodes, the head of the queue, and totals.

:class:`Layout` fixes the vector's shape for one cluster and builds it. In
order (GPU counts are divided by ``scale``, the cluster's largest node;
times are in hours):

- ``max_nodes`` node rows of ``T + 3`` (T GPU types, cluster order; rows past
  the cluster's nodes are zeros): the node's free GPUs in its type's column,
  its largest free NVLink-connected block, its healthy GPUs, and 1 when it
  takes new work (not down, not draining);
- K queue slots of ``6 + 2T + P`` (P priority classes; an empty slot is
  zeros): 1 (a job is there), its GPUs, its shortest estimated duration,
  its wait so far, its weight, 1 when it needs NVLink-connected GPUs; then
  which GPU types it may use (T), its estimated duration on each (T, 0
  where it may not), and its class (one-hot, P);
- 4 totals: queued jobs not shown, running jobs, jobs picked this round, and
  the share of healthy GPUs free now.

Flags, shares and node rows lie in [0, 1]; the other features are capped at
:data:`CAP` so the space is bounded.

Node rows change only where a pick took GPUs (:meth:`Layout.update_nodes`);
a queued job's row is fixed for the round (:meth:`Layout.job_row`).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from whale_opt.gym.partial import PartialRound
from whale_opt.problem_data import Instance, waited_s

HOUR = 3600.0
JOB_FIXED = 6
TOTALS = 4
CAP = 1e6  # features without a natural bound (hours, weights, counts) are capped here


class Layout:
    """Where each feature sits in the observation vector of ``cluster``'s episodes.

    Parameters
    ----------
    cluster
        The cluster (its GPU types, priority classes and nodes fix the shape).
    slots
        K, the queue slots shown.
    max_nodes
        Node rows (at least the cluster's node count).
    """

    def __init__(self, cluster: Instance, slots: int, max_nodes: int) -> None:
        if len(cluster.nodes) > max_nodes:
            raise ValueError(
                f"cluster {cluster.name!r} has {len(cluster.nodes)} nodes, max_nodes {max_nodes}"
            )
        self.types = tuple(cluster.gpu_types)
        self.classes = tuple(cluster.priority_classes)
        self.slots = slots
        self.max_nodes = max_nodes
        self.scale = float(max(node.gpu_count for node in cluster.nodes))
        self.node_width = len(self.types) + 3
        self.job_width = JOB_FIXED + 2 * len(self.types) + len(self.classes)
        self.size = max_nodes * self.node_width + slots * self.job_width + TOTALS

        self.high = self._high()

    def _high(self) -> np.ndarray:
        """Each feature's upper bound: 1 for flags, shares and node rows, else :data:`CAP`."""
        t_count = len(self.types)
        job = np.ones(self.job_width, dtype=np.float32)
        job[1:5] = CAP  # GPUs (a gang may span nodes), duration, wait, weight
        job[JOB_FIXED + t_count : JOB_FIXED + 2 * t_count] = CAP
        return np.concatenate(
            [
                np.ones(self.max_nodes * self.node_width, dtype=np.float32),
                np.tile(job, self.slots),
                np.array([CAP, CAP, CAP, 1.0], dtype=np.float32),
            ]
        )

    def space(self) -> spaces.Box:
        """The observation space: ``size`` float32 features in [0, :attr:`high`]."""
        return spaces.Box(np.zeros(self.size, dtype=np.float32), self.high, dtype=np.float32)

    def node_rows(self, partial: PartialRound) -> np.ndarray:
        """Every node's row on the round's state, as a (max_nodes, node_width) array."""
        rows = np.zeros((self.max_nodes, self.node_width), dtype=np.float32)
        self.update_nodes(rows, partial, range(len(partial.instance.nodes)))
        return rows

    def update_nodes(self, rows: np.ndarray, partial: PartialRound, nodes: range | tuple) -> None:
        """Refill the rows of ``nodes`` (positions) from the round's state."""
        state = partial.state
        instance = partial.instance
        for n in nodes:
            node = instance.nodes[n]
            free = state.free_mask(n)
            row = rows[n]
            row[:] = 0.0
            row[partial.node_type[n]] = free.bit_count() / self.scale
            row[-3] = state.topology(n).largest_block(free) / self.scale
            row[-2] = state.healthy_count(n) / self.scale
            row[-1] = float(not node.down and not node.draining)

    def job_row(self, instance: Instance, position: int) -> np.ndarray:
        """Queued job ``position``'s slot row."""
        job = instance.queue[position]
        row = np.zeros(self.job_width, dtype=np.float32)
        durations = instance.durations[position]
        shortest = min(durations.values()) if durations else 0
        row[:JOB_FIXED] = (
            1.0,
            job.gpu_count / self.scale,
            shortest / HOUR,
            waited_s(job) / HOUR,
            job.weight,
            float(job.topology == "nvlink" and job.gpu_count > 1),
        )
        t_count = len(self.types)
        eligible = instance.eligible_types[position]
        for t, name in enumerate(self.types):
            if name in eligible:
                row[JOB_FIXED + t] = 1.0
                row[JOB_FIXED + t_count + t] = durations.get(name, 0) / HOUR
        row[JOB_FIXED + 2 * t_count + self.classes.index(job.priority_class)] = 1.0
        return row

    def observe(
        self, node_rows: np.ndarray, job_rows: list[np.ndarray], totals: tuple[float, ...]
    ) -> np.ndarray:
        """The observation vector (a new array) from its parts."""
        out = np.zeros(self.size, dtype=np.float32)
        cut = self.max_nodes * self.node_width
        out[:cut] = node_rows.ravel()
        for slot, row in enumerate(job_rows[: self.slots]):
            start = cut + slot * self.job_width
            out[start : start + self.job_width] = row
        out[-TOTALS:] = totals
        return np.minimum(out, self.high, out=out)
