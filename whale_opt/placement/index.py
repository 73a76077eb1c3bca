"""Per-node free GPUs over time as numpy arrays: what lets a search skip nodes.

A :class:`FreeIndex` mirrors the GPU usage profiles of a cluster state
(:class:`~whale_opt.placement.state.ClusterState`) as arrays over nodes:
for every node and every count ``v`` of GPUs, the maximal intervals
``[a, b)`` over which at least ``v`` GPUs of the node are unused (usage
<= healthy - v), and the node's usage breakpoints. From them, for many
nodes at once and without a Python loop over nodes, it answers:

- :meth:`FreeIndex.earliest`: per node, the earliest start from a given
  time at which ``v`` GPUs stay unused for a whole duration (the GPU count
  alone: a lower bound on the exact fit, which adds CPU, memory and quota);
- :meth:`FreeIndex.earliest_and_unused`: that, and per node the first
  moment from t=1 at which ``v`` GPUs are unused at all;
- :meth:`FreeIndex.window_room`: at each of many start times, the GPUs
  unused over the whole window summed over nodes (an upper bound on what a
  job spread over them could get);
- :meth:`FreeIndex.drops`: the moments the nodes' total usage drops.

Rows are rebuilt lazily: the state marks a node stale when its profile
changes, and a query rebuilds the stale rows it reads (only those).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from whale_opt.placement.profile import EPS, INF, Profile

Ints = np.ndarray  # node positions, 1-D


class FreeIndex:
    """Free GPU intervals per node and GPU count, mirroring usage profiles."""

    __slots__ = (
        "_base",
        "_breaks",
        "_count",
        "_deltas",
        "_ends",
        "_limit_array",
        "_limits",
        "_profiles",
        "_stale",
        "_starts",
        "_steps",
        "depth",
    )

    def __init__(self, limits: Sequence[int], profiles: list[Profile]) -> None:
        # limits: healthy GPUs per node; profiles: the state's GPU usage, by node (live).
        n = len(limits)
        self._limits = list(limits)
        self._limit_array = np.array(self._limits, dtype=float)
        self._profiles = profiles
        self.depth = max(self._limits, default=0)
        # _starts[v, node, j], _ends[v, node, j]: the j-th of the _count[v, node]
        # intervals with >= v GPUs unused (padding: start inf, end 0: holds no window).
        self._starts = np.full((self.depth + 1, n, 2), INF)
        self._ends = np.zeros((self.depth + 1, n, 2))
        self._count = np.zeros((self.depth + 1, n), dtype=np.int64)
        # _base[node]: usage at time 0; _breaks[node, j], _deltas[node, j]: its
        # changes after (padding: 0, 0).
        self._base = np.zeros(n)
        self._breaks = np.zeros((n, 4))
        self._deltas = np.zeros((n, 4))
        self._steps = np.zeros(n, dtype=np.int64)  # breaks in use per node
        # _stale[v, node]: the node's level-v rows (v=0: breakpoints) are out of date.
        self._stale = np.ones((self.depth + 1, n), dtype=bool)

    def copy(self, profiles: list[Profile]) -> FreeIndex:
        """An independent copy over ``profiles`` (the twin state's own)."""
        twin = object.__new__(FreeIndex)
        twin._limits = self._limits
        twin._limit_array = self._limit_array
        twin._profiles = profiles
        twin.depth = self.depth
        twin._starts = self._starts.copy()
        twin._ends = self._ends.copy()
        twin._count = self._count.copy()
        twin._base = self._base.copy()
        twin._breaks = self._breaks.copy()
        twin._deltas = self._deltas.copy()
        twin._steps = self._steps.copy()
        twin._stale = self._stale.copy()
        return twin

    def touch(self, node: int) -> None:
        """``node``'s profile changed: rebuild its rows before they are next read."""
        self._stale[:, node] = True

    def _fresh(self, level: int, nodes: Ints) -> None:
        """Rebuild the stale rows of ``level`` (0: the usage breakpoints) of ``nodes``."""
        stale = nodes[self._stale[level, nodes]]
        if len(stale):
            for node in stale.tolist():
                if level:
                    self._rebuild(node, level)
                else:
                    self._rebuild_steps(node)
            self._stale[level, stale] = False

    def _rebuild(self, node: int, gpus: int) -> None:
        """``node``'s intervals with at least ``gpus`` GPUs unused."""
        profile = self._profiles[node]
        times, levels = profile.times, profile.levels
        room = self._limits[node] - gpus + EPS
        starts: list[float] = []
        ends: list[float] = []
        opened: float | None = None
        for k, level in enumerate(levels):
            if level <= room:
                if opened is None:
                    opened = times[k]
            elif opened is not None:
                starts.append(opened)
                ends.append(times[k])
                opened = None
        if opened is not None:
            starts.append(opened)
            ends.append(INF)
        count = len(starts)
        width = self._starts.shape[2]
        if count > width:
            wider = ((0, 0), (0, 0), (0, max(count, 2 * width) - width))
            self._starts = np.pad(self._starts, wider, constant_values=INF)
            self._ends = np.pad(self._ends, wider, constant_values=0)
        clear = max(count, int(self._count[gpus, node]))
        if clear:
            self._starts[gpus, node, :clear] = starts + [INF] * (clear - count)
            self._ends[gpus, node, :clear] = ends + [0.0] * (clear - count)
            self._count[gpus, node] = count

    def _rebuild_steps(self, node: int) -> None:
        """``node``'s usage at time 0 and its changes after."""
        profile = self._profiles[node]
        times, levels = profile.times, profile.levels
        self._base[node] = levels[0]
        steps = len(times) - 1
        width = self._breaks.shape[1]
        if steps > width:
            grow = max(steps, 2 * width) - width
            self._breaks = np.pad(self._breaks, ((0, 0), (0, grow)))
            self._deltas = np.pad(self._deltas, ((0, 0), (0, grow)))
        clear = max(steps, int(self._steps[node]))
        self._breaks[node, :clear] = times[1:] + [0] * (clear - steps)
        deltas = [levels[k] - levels[k - 1] for k in range(1, steps + 1)]
        self._deltas[node, :clear] = deltas + [0.0] * (clear - steps)
        self._steps[node] = steps

    def _rows(self, gpus: int, nodes: Ints) -> tuple[np.ndarray, np.ndarray]:
        """The level-``gpus`` intervals of ``nodes``, only as wide as they need."""
        self._fresh(gpus, nodes)
        width = int(self._count[gpus][nodes].max(initial=0))
        return self._starts[gpus, :, :width][nodes], self._ends[gpus, :, :width][nodes]

    # -- queries -------------------------------------------------------------

    def earliest(
        self, nodes: Ints, gpus: int, duration: int, first: np.ndarray | int
    ) -> np.ndarray:
        """Per node of ``nodes``: the earliest t >= its ``first`` (finite, >= 1) at
        which ``gpus`` GPUs stay unused on [t, t+duration) (inf: never)."""
        if gpus > self.depth:
            return np.full(len(nodes), INF)
        return self._earliest(*self._rows(gpus, nodes), duration, first)

    def earliest_and_unused(
        self, nodes: Ints, gpus: int, duration: int, first: np.ndarray | int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per node of ``nodes``: :meth:`earliest`, and the first moment t >= 1 at which
        ``gpus`` GPUs are unused at all (inf: never), from one read of its rows."""
        if gpus > self.depth:
            return np.full(len(nodes), INF), np.full(len(nodes), INF)
        starts, ends = self._rows(gpus, nodes)
        unused = np.where(ends > 1, np.maximum(starts, 1), INF).min(axis=1, initial=INF)
        return self._earliest(starts, ends, duration, first), unused

    @staticmethod
    def _earliest(
        starts: np.ndarray, ends: np.ndarray, duration: int, first: np.ndarray | int
    ) -> np.ndarray:
        """Per row of intervals: the earliest t >= its ``first`` holding ``duration``."""
        from_first = np.maximum(starts, np.asarray(first)[..., None] if np.ndim(first) else first)
        return np.where(ends - from_first >= duration, from_first, INF).min(axis=1, initial=INF)

    def window_room(self, nodes: Ints, most: int, duration: int, times: np.ndarray) -> np.ndarray:
        """At each start t of ``times``: the GPUs that stay unused on [t, t+duration),
        summed over ``nodes``, each node counted up to ``most`` GPUs."""
        depth = min(most, self.depth)
        if depth < 1 or len(nodes) == 0:
            return np.zeros(len(times), dtype=np.int64)
        for level in range(1, depth + 1):
            self._fresh(level, nodes)
        width = int(self._count[1 : depth + 1][:, nodes].max(initial=0))
        starts = self._starts[1 : depth + 1, :, :width][:, nodes]
        ends = self._ends[1 : depth + 1, :, :width][:, nodes]
        # A node with >= v GPUs unused over the whole window counts once for each v:
        # the window lies in one of its level-v intervals [a, b), so a <= t <= b - d.
        holds = ends - starts >= duration
        lows = np.sort(starts[holds])
        highs = np.sort(ends[holds] - duration)
        opened = np.searchsorted(lows, times, side="right")
        closed = np.searchsorted(highs, times, side="left")
        return opened - closed

    def drops(self, nodes: Ints) -> np.ndarray:
        """The moments (after 0) at which the usage of one of ``nodes`` drops, sorted (a
        drop on one node hidden by a rise on another counts: the room is per node)."""
        self._fresh(0, nodes)
        width = int(self._steps[nodes].max(initial=0))
        breaks = self._breaks[:, :width][nodes]
        deltas = self._deltas[:, :width][nodes]
        return np.unique(breaks[deltas < 0])

    def room_at(self, nodes: Ints, t: int, free_now: np.ndarray) -> np.ndarray:
        """Per node of ``nodes``: the GPUs unused at the moment ``t``, and at t=0 no
        more than ``free_now`` (its free GPUs, by node position)."""
        self._fresh(0, nodes)
        width = int(self._steps[nodes].max(initial=0))
        breaks, deltas = self._breaks[:, :width][nodes], self._deltas[:, :width][nodes]
        use = self._base[nodes] + np.where(breaks <= t, deltas, 0).sum(1)
        limits = self._limit_array[nodes]
        return np.minimum(limits if t else free_now[nodes], np.trunc(limits - use + EPS))
