"""Usage over time as a step function: the building block of every timeline."""

from __future__ import annotations

import bisect
import math

import numpy as np

INF = math.inf
EPS = 1e-9
LONG = 64  # steps after which :meth:`Profile.earliest` goes on over arrays, not lists


class Profile:
    """Usage over time as a step function: ``levels[i]`` holds on [times[i], times[i+1]).

    Change it only through :meth:`add` (a long profile keeps an array copy of
    itself for :meth:`earliest`, dropped by :meth:`add`).
    """

    __slots__ = ("_arrays", "levels", "times")

    def __init__(self) -> None:
        self.times: list[int] = [0]
        self.levels: list[float] = [0.0]
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def copy(self) -> Profile:
        """An independent copy."""
        twin = Profile.__new__(Profile)
        twin.times = list(self.times)
        twin.levels = list(self.levels)
        twin._arrays = self._arrays
        return twin

    def _split(self, t: int) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] != t:
            self.times.insert(i + 1, t)
            self.levels.insert(i + 1, self.levels[i])
            i += 1
        return i

    def add(self, start: int, end: int, amount: float) -> None:
        """Add ``amount`` of usage on [start, end)."""
        if end <= start or amount == 0:
            return
        self._arrays = None
        i = self._split(start)
        j = self._split(end)
        self.levels[i:j] = [level + amount for level in self.levels[i:j]]

    def drops(self) -> list[int]:
        """The moments (after 0) at which the level drops."""
        levels = self.levels
        return [t for k, t in enumerate(self.times) if k and levels[k] < levels[k - 1]]

    def peak(self, start: int, end: int) -> float:
        """Highest usage on [start, end)."""
        i = bisect.bisect_right(self.times, start) - 1
        best = self.levels[i]
        i += 1
        while i < len(self.times) and self.times[i] < end:
            best = max(best, self.levels[i])
            i += 1
        return best

    def earliest(
        self, start: int, duration: int, amount: float, limit: float, give_up: float = INF
    ) -> float:
        """Earliest t >= start with usage + amount <= limit on [t, t+duration).

        inf if never, or if only later than ``give_up``.
        """
        if amount > limit + EPS or start > give_up:
            return INF
        times, levels = self.times, self.levels
        last = len(times)
        t = start
        # One pass: a segment too full moves the start past it; each is read once.
        # A long scan goes on over arrays (:meth:`_earliest_long`), from where it is.
        k = bisect.bisect_right(times, t) - 1
        steps = LONG
        while k < last and times[k] < t + duration:
            if levels[k] + amount > limit + EPS:
                if k + 1 >= last:
                    return INF
                t = times[k + 1]
                if t > give_up:
                    return INF
            k += 1
            steps -= 1
            if not steps:
                return self._earliest_long(t, duration, amount, limit, give_up)
        return t

    def _earliest_long(
        self, start: int, duration: int, amount: float, limit: float, give_up: float
    ) -> float:
        """:meth:`earliest` on arrays: the same answer without a Python loop."""
        if self._arrays is None:
            self._arrays = (np.array(self.times, dtype=float), np.array(self.levels))
        times, levels = self._arrays
        i = bisect.bisect_right(self.times, start) - 1
        full = np.flatnonzero(levels[i:] + amount > limit + EPS) + i
        if len(full) == 0 or times[full[0]] >= start + duration:
            return start
        # Past a segment too full, the next start is its end; it holds when the
        # next segment too full begins at least ``duration`` later.
        last = len(times)
        ends = np.append(times[full[full + 1 < last] + 1], INF)[: len(full)]
        nexts = np.append(times[full[1:]], INF)
        holds = np.flatnonzero((ends < INF) & (nexts >= ends + duration))
        if len(holds) == 0:
            return INF
        t = int(ends[holds[0]])
        return t if t <= give_up else INF

    def level_at(self, t: int) -> float:
        """Usage at time ``t``."""
        return self.levels[bisect.bisect_right(self.times, t) - 1]
