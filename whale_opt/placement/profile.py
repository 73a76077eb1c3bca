"""Usage over time as a step function: the building block of every timeline."""

from __future__ import annotations

import bisect
import math

INF = math.inf
EPS = 1e-9


class Profile:
    """Usage over time as a step function: ``levels[i]`` holds on [times[i], times[i+1])."""

    __slots__ = ("levels", "times")

    def __init__(self) -> None:
        self.times: list[int] = [0]
        self.levels: list[float] = [0.0]

    def copy(self) -> Profile:
        """An independent copy."""
        twin = Profile.__new__(Profile)
        twin.times = list(self.times)
        twin.levels = list(self.levels)
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
        i = self._split(start)
        j = self._split(end)
        for k in range(i, j):
            self.levels[k] += amount

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
        if amount > limit + EPS:
            return INF
        t = start
        i = bisect.bisect_right(self.times, t) - 1
        while t <= give_up:
            end = t + duration
            k = i
            blocked = -1
            while k < len(self.times) and self.times[k] < end:
                if self.levels[k] + amount > limit + EPS:
                    blocked = k
                k += 1
            if blocked < 0:
                return t
            if blocked + 1 >= len(self.times):
                return INF
            i = blocked + 1
            t = self.times[i]
        return INF

    def level_at(self, t: int) -> float:
        """Usage at time ``t``."""
        return self.levels[bisect.bisect_right(self.times, t) - 1]
