"""Usage over time as a step function: the building block of every timeline."""

from __future__ import annotations

import bisect
import math

import numpy as np

INF = math.inf
EPS = 1e-9
LONG = 64  # steps beyond which :meth:`Profile.earliest` reads arrays, not lists


class Profile:
    """Usage over time as a step function: ``levels[i]`` holds on [times[i], times[i+1]).

    Change it only through :meth:`add`. A long profile (more than :data:`LONG`
    steps) answers :meth:`earliest` from arrays: a copy of itself, kept up to
    date by :meth:`add`, and per (amount, limit) asked the runs of steps with
    room for the amount (dropped by :meth:`add`).
    """

    __slots__ = ("_arrays", "_runs", "levels", "times")
    _long: float = LONG  # steps beyond which this profile reads arrays

    def __init__(self) -> None:
        self.times: list[int] = [0]
        self.levels: list[float] = [0.0]
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._runs: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def until(cls, usage: list[tuple[int, float]]) -> Profile:
        """The profile of ``(end, amount)`` usages that all hold from 0: the one
        :meth:`add` makes of them in this order (the same levels, to the bit),
        built at once."""
        usage = [(end, amount) for end, amount in usage if end > 0 and amount != 0]
        profile = cls()
        profile.times = [0, *sorted({end for end, _ in usage})]
        levels = [0.0] * len(profile.times)
        for end, amount in usage:
            for i, t in enumerate(profile.times):
                if t >= end:
                    break
                levels[i] += amount
        profile.levels = levels
        return profile

    def copy(self) -> Profile:
        """An independent copy."""
        twin = Profile.__new__(Profile)
        twin.times = list(self.times)
        twin.levels = list(self.levels)
        twin._arrays = self._arrays  # never changed in place: add() makes new ones
        # Shared too: until either changes, runs found by one hold for both; add()
        # gives the one that changes a dict of its own.
        twin._runs = self._runs
        return twin

    def scratch(self) -> Profile:
        """A copy for a few adds and reads (the node search re-timing one node): it
        answers from its lists however long it is, since arrays kept up to date
        cost more than they save over a few reads (5x on 80-job nodes)."""
        twin = _Scratch.__new__(_Scratch)
        twin.times = list(self.times)
        twin.levels = list(self.levels)
        twin._arrays = None
        twin._runs = {}
        return twin

    def _split(self, t: int) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] != t:
            self.times.insert(i + 1, t)
            self.levels.insert(i + 1, self.levels[i])
            i += 1
            if self._arrays is not None:
                times, levels = self._arrays
                self._arrays = (np.insert(times, i, t), np.insert(levels, i, levels[i - 1]))
        return i

    def add(self, start: int, end: int, amount: float) -> None:
        """Add ``amount`` of usage on [start, end)."""
        if end <= start or amount == 0:
            return
        self._runs = {}
        i = self._split(start)
        j = self._split(end)
        self.levels[i:j] = [level + amount for level in self.levels[i:j]]
        if self._arrays is not None:
            times, levels = self._arrays
            levels = levels.copy()
            levels[i:j] += amount
            self._arrays = (times, levels)

    def drops(self) -> list[int]:
        """The moments (after 0) at which the level drops."""
        if len(self.times) > self._long:
            times, used = self._array_copy()
            return times[1:][used[1:] < used[:-1]].astype(np.int64).tolist()
        levels = self.levels
        return [t for k, t in enumerate(self.times) if k and levels[k] < levels[k - 1]]

    def _array_copy(self) -> tuple[np.ndarray, np.ndarray]:
        """The profile as (times, levels) arrays, made once and kept up to date by
        :meth:`add` (never changed in place: a copy may share them)."""
        if self._arrays is None:
            self._arrays = (np.array(self.times, dtype=float), np.array(self.levels))
        return self._arrays

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
        if last > self._long:
            return self._earliest_long(start, duration, amount, limit, give_up)
        t = start
        # One pass: a segment too full moves the start past it; each is read once.
        k = bisect.bisect_right(times, t) - 1
        while k < last and times[k] < t + duration:
            if levels[k] + amount > limit + EPS:
                if k + 1 >= last:
                    return INF
                t = times[k + 1]
                if t > give_up:
                    return INF
            k += 1
        return t

    def _earliest_long(
        self, start: int, duration: int, amount: float, limit: float, give_up: float
    ) -> float:
        """:meth:`earliest` from the runs with room for ``amount``: the first that
        still holds ``duration`` from ``start`` on."""
        starts, ends = self._room_runs(amount, limit)
        j = int(np.searchsorted(ends, start, side="right"))
        # Runs are maximal: only the first, which may begin before start, is cut.
        if j < len(ends) and ends[j] - max(starts[j], start) >= duration:
            t = max(int(starts[j]), start)
        else:
            holds = np.flatnonzero(ends[j + 1 :] - starts[j + 1 :] >= duration)
            if len(holds) == 0:
                return INF
            t = int(starts[j + 1 + holds[0]])
        return t if t <= give_up else INF

    def _room_runs(self, amount: float, limit: float) -> tuple[np.ndarray, np.ndarray]:
        """The maximal intervals [start, end) on which usage + ``amount`` <= ``limit``
        (an open last one ends at inf), as two arrays, kept until :meth:`add`."""
        key = (amount, limit)
        runs = self._runs.get(key)
        if runs is None:
            times, levels = self._array_copy()
            room = np.zeros(len(levels) + 2, dtype=np.int8)
            room[1:-1] = levels + amount <= limit + EPS
            edges = room[1:] - room[:-1]  # 1: a run begins at that step, -1: one ended
            bounds = np.append(times, INF)
            runs = (bounds[edges == 1], bounds[np.flatnonzero(edges == -1)])
            self._runs[key] = runs
        return runs

    def level_at(self, t: int) -> float:
        """Usage at time ``t``."""
        return self.levels[bisect.bisect_right(self.times, t) - 1]


class _Scratch(Profile):
    """A profile that always reads its lists (:meth:`Profile.scratch`)."""

    __slots__ = ()
    _long = INF
