"""Free capacity over time as a step function, and the pieces of a given size it holds."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from whale_opt.placement.profile import Profile


class Capacity:
    """A free capacity over time, ``levels[k]`` on ``[times[k], times[k+1])``, the
    last level forever."""

    def __init__(self, times: Sequence[float], levels: Sequence[float]) -> None:
        self.times = list(times)
        self.levels = list(levels)

    def fill(self, work: float) -> tuple[float, float]:
        """``(F(work), T(work))``: the least ``integral t * r(t) dt`` of any rate
        ``r`` within the capacity doing ``work`` (the earliest capacity filled
        first), and when that filling ends."""
        total = 0.0
        left = work
        for k, level in enumerate(self.levels):
            t0 = self.times[k]
            t1 = self.times[k + 1] if k + 1 < len(self.times) else math.inf
            if level <= 0:
                continue
            if level * (t1 - t0) >= left:
                tau = left / level
                return total + level * (tau * t0 + tau * tau / 2), t0 + tau
            total += level * (t1 * t1 - t0 * t0) / 2
            left -= level * (t1 - t0)
        return math.inf, math.inf  # no capacity left: cannot happen past the fixed jobs

    def areas(self, grid: np.ndarray) -> np.ndarray:
        """The capacity's integral over each bucket ``[grid[b], grid[b + 1])``: the
        running area is piecewise linear between the steps, so interpolating it
        at the grid is exact."""
        times = np.asarray(self.times, dtype=float)
        levels = np.asarray(self.levels, dtype=float)
        far = max(float(grid[-1]), float(times[-1])) + 1.0
        knots = np.append(times, far)
        area = np.concatenate(([0.0], np.cumsum(levels * np.diff(knots))))
        return np.diff(np.interp(grid, knots, area, left=0.0))

    @classmethod
    def of(cls, profile: Profile) -> Capacity:
        """A :class:`~whale_opt.placement.profile.Profile`'s levels as a capacity."""
        return cls(profile.times, profile.levels)


def slots(
    nodes: list[tuple[Profile, int]], size: int, scales: list[float] | None = None
) -> Capacity:
    """``sum_n scale_n * floor(free_n(t) / size)``: how many ``size``-GPU pieces the
    free GPUs of ``nodes`` (each: GPUs used over time, healthy GPUs) hold at once,
    each node's weighted by its scale (1 when none are given)."""
    times = np.unique(np.concatenate([np.asarray(used.times, dtype=float) for used, _ in nodes]))
    levels = np.zeros(len(times))
    for k, (used, healthy) in enumerate(nodes):
        at = np.searchsorted(np.asarray(used.times, dtype=float), times, side="right") - 1
        free = healthy - np.asarray(used.levels, dtype=float)[at]
        levels += (1.0 if scales is None else scales[k]) * (np.maximum(0.0, free) // size)
    return Capacity(times.tolist(), levels.tolist())
