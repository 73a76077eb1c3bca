"""A search's stopping rule: a deadline, and a patience for want of progress.

A round's improvement search (the exact model, the order search, the
neighbourhoods) ends at its time limit, or earlier once it has gone
``patience_s`` seconds without progress: a better decision, or (inside a
CP-SAT call on the whole round's model) a higher bound, as when CP-SAT is
proving the model. This is the "unimproved time" termination of local-search
planners. Rounds that cannot be improved, which on a lightly loaded cluster
is most of them, then return well before their limit.

One :class:`Patience` serves one round; each of its searches (the exact
model, the order search, the neighbourhoods) starts with a full patience
(:meth:`Patience.restart`), since one method's stall says little of the
next one's. A CP-SAT callback may record progress from the
solver's thread; a float assignment is atomic, so no lock is needed.

With a ``gain`` (a share of the objective), a better decision is progress
only once it is that share below the one that last was: a search creeping
down by crumbs is stalled too. Crumbs add up: each is measured from the
last decision that counted, not from the one before it.
"""

from __future__ import annotations

import math
import time


def gained(anchor: float | None, value: float, gain: float) -> bool:
    """Whether ``value``, a better objective than the search had, is progress on
    ``anchor`` (the objective that last was): ``gain`` of it below; always when
    ``gain`` is 0 or there is no anchor."""
    if anchor is None or not gain:
        return True
    return value < anchor - gain * abs(anchor)


class Patience:
    """Stop once ``patience_s`` seconds of search went by without progress
    (``math.inf``: never); with ``gain``, progress is a better decision by at
    least that share of the objective (module docstring).

    The clock starts on creation (or at ``now``, a :func:`time.perf_counter`
    instant). Building and presolving a CP-SAT model is not search: the
    clock is paused over it (:meth:`pause`) until the model's first solution
    (:meth:`resume`), so a model slow to start is not cut before it searched.
    """

    def __init__(
        self, patience_s: float = math.inf, now: float | None = None, gain: float = 0.0
    ) -> None:
        self.patience_s = patience_s
        self.gain = gain
        self.since: float | None = time.perf_counter() if now is None else now
        self.idle = 0.0  # search seconds without progress before ``since``
        self.stalled = False  # whether a phase ended for want of progress
        self.anchor: float | None = None  # the objective that last counted as progress
        self.value: float | None = None  # the best objective reported

    @property
    def active(self) -> bool:
        """Whether it can stop anything (a finite patience)."""
        return math.isfinite(self.patience_s)

    def progress(self, value: float | None = None) -> None:
        """Something better was found (a decision of objective ``value``, when
        given): the clock starts again (and runs), unless ``value`` falls short
        of the :attr:`gain`."""
        if value is not None:
            self.value = value
            if not gained(self.anchor, value, self.gain):
                return
            self.anchor = value
        self._reset()

    def improved_by(self, delta: float) -> None:
        """The best decision got ``delta`` cheaper (:meth:`progress`, for a search
        that knows its moves' changes and not the objective)."""
        self.progress(None if self.value is None else self.value - delta)

    def restart(self, value: float | None = None) -> None:
        """A new search begins (another method) from a decision of objective
        ``value``: a full patience, no stall yet."""
        self.anchor = self.value = value
        self._reset()
        self.stalled = False

    def _reset(self) -> None:
        self.idle = 0.0
        self.since = time.perf_counter()

    def pause(self) -> None:
        """Stop the clock (it keeps the idle time so far)."""
        if self.since is not None:
            self.idle += time.perf_counter() - self.since
            self.since = None

    def resume(self) -> None:
        """Run the clock again, from the idle time it had."""
        if self.since is None:
            self.since = time.perf_counter()

    def stop_at(self, deadline: float) -> float:
        """When to stop: the earlier of ``deadline`` and the end of the patience
        (``deadline`` while the clock is paused)."""
        since = self.since
        if since is None:
            return deadline
        return min(deadline, since + self.patience_s - self.idle)

    def over(self, deadline: float) -> bool:
        """Whether to stop now; records a stop for want of progress in :attr:`stalled`."""
        now = time.perf_counter()
        if now < self.stop_at(deadline):
            return False
        if now < deadline:
            self.stalled = True
        return True


class GapWatch:
    """Progress inside one minimising search, for a :class:`Patience`: each better
    solution, and (when the bound is fed, :meth:`bound_rose`) each higher
    bound once there is a solution. The first solution is where the search
    starts (often the hint), not progress. Feed the bound only of a model
    whose bound bounds the round: a neighbourhood's bound says nothing of the
    round, and its first rise would count each neighbourhood as progress."""

    def __init__(self, patience: Patience) -> None:
        self.patience = patience
        self.best = math.inf
        self.bound = -math.inf
        self.anchor: float | None = None  # in the model's units: the last that counted

    def solution(self, value: float) -> None:
        """A solution of objective ``value`` was found (the first one runs a paused clock)."""
        self.patience.resume()
        if value < self.best:
            if self.anchor is None:
                self.anchor = value
            elif gained(self.anchor, value, self.patience.gain):
                self.anchor = value
                self.patience.progress()
            self.best = value

    def bound_rose(self, bound: float) -> None:
        """The search's lower bound is now ``bound``."""
        if bound > self.bound and math.isfinite(self.best):
            self.patience.progress()
        self.bound = max(self.bound, bound)
