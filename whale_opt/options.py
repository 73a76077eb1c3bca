"""Run settings of a round: how long to search, with which seed and preset.

They are not part of the problem (two runs of one :class:`~whale_opt.problem_data.Instance`
may use different ones). The instance@1 file keeps them in its ``policy``
block, so the file format does not change: :func:`whale_opt.io.read_round`
splits that block into the instance's :class:`~whale_opt.problem_data.Policy`
and a :class:`SolveOptions`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from whale_opt.problem_data import MAX_SECONDS, FieldError

RUN_SETTINGS = ("time_limit_s", "seed", "report_bound")
"""The keys of an instance file's ``policy`` block that are run settings."""


@dataclass(frozen=True)
class SolveOptions:
    """How one round is solved.

    Parameters
    ----------
    time_limit_s
        Wall-clock seconds the round may take (a hard wall for CP-SAT; the
        greedy answer stands when it runs out).
    seed
        Random seed of the search (same input, seed and preset: same decision
        when the preset is deterministic).
    report_bound
        Off: report only the trivial bound (the sum of weighted shortest
        durations) and skip the analytic one, for runs where nobody reads it.
    preset
        CP-SAT parameter preset name (``fast``, ``default``, ``quick``, ``deterministic``;
        None: ``default``); the heuristics ignore it.
    hint
        Queued job ids in the order the previous round planned them (earliest
        start first; :class:`~whale_opt.scheduler.Scheduler` passes it on): cpsat
        also list-schedules the queue in that order (new jobs after, by WSPT) and
        starts from the better plan. Ids no longer queued are ignored; the
        heuristics ignore it.
    """

    time_limit_s: float = 10.0
    seed: int = 0
    report_bound: bool = True
    preset: str | None = None
    hint: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        limit = self.time_limit_s
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or not math.isfinite(limit)
            or not 0 < limit <= MAX_SECONDS
        ):
            raise FieldError("time_limit_s", limit, f"must be a number > 0 and <= {MAX_SECONDS}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise FieldError("seed", self.seed, "must be an integer")
        if not isinstance(self.report_bound, bool):
            raise FieldError("report_bound", self.report_bound, "must be true or false")
        if self.preset is not None and (not isinstance(self.preset, str) or not self.preset):
            raise FieldError("preset", self.preset, "must be a preset name")
        if not isinstance(self.hint, tuple | list) or not all(
            isinstance(i, str) for i in self.hint
        ):
            raise FieldError("hint", self.hint, "must be a sequence of queued job ids")
        object.__setattr__(self, "hint", tuple(self.hint))  # a list read from JSON too

    def replace(self, **changes: Any) -> SolveOptions:
        """A copy with ``changes`` applied, validated again."""
        return replace(self, **changes)


DEFAULT_OPTIONS = SolveOptions()
"""The run settings of a round that names none."""
