"""The unimproved-time rule: a round's search stops once it stops finding better."""

from __future__ import annotations

import math

import pytest

from whale_opt import patience as patience_module
from whale_opt.patience import GapWatch, Patience


class Clock:
    """A settable stand-in for :func:`time.perf_counter`."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(patience_module.time, "perf_counter", fake)
    return fake


def test_the_search_stops_once_it_went_the_patience_without_progress(clock: Clock) -> None:
    patience = Patience(2.0)
    assert patience.stop_at(150.0) == 102.0
    clock.now = 101.5
    assert not patience.over(150.0)
    patience.progress()  # something better: the clock starts again
    clock.now = 103.0
    assert not patience.over(150.0)
    clock.now = 103.5
    assert patience.over(150.0)
    assert patience.stalled


def test_a_new_search_starts_with_a_full_patience(clock: Clock) -> None:
    patience = Patience(2.0)
    clock.now = 103.0
    assert patience.over(150.0) and patience.stalled
    patience.restart()
    assert not patience.stalled
    assert patience.stop_at(150.0) == pytest.approx(105.0)


def test_the_deadline_is_not_a_stall(clock: Clock) -> None:
    patience = Patience(10.0)
    clock.now = 105.0
    assert patience.over(105.0)
    assert not patience.stalled


def test_without_a_patience_only_the_deadline_stops(clock: Clock) -> None:
    patience = Patience()
    assert not patience.active
    clock.now = 1e9
    assert not patience.over(2e9)
    assert patience.stop_at(2e9) == 2e9


def test_the_clock_is_held_while_paused_and_keeps_what_it_had(clock: Clock) -> None:
    patience = Patience(2.0)
    clock.now = 101.5  # 1.5 s idle
    patience.pause()
    clock.now = 110.0  # a model being built and presolved: not search
    assert patience.stop_at(150.0) == 150.0
    assert not patience.over(150.0)
    patience.resume()
    assert patience.stop_at(150.0) == pytest.approx(110.5)  # the 0.5 s it had left
    patience.resume()  # resuming a running clock changes nothing
    assert patience.stop_at(150.0) == pytest.approx(110.5)


def test_a_solution_runs_a_paused_clock_and_only_a_better_one_restarts_it(clock: Clock) -> None:
    patience = Patience(2.0)
    watch = GapWatch(patience)
    clock.now = 101.0
    patience.pause()
    clock.now = 105.0
    watch.solution(50.0)  # the first solution (the hint): the search starts, no progress
    assert patience.stop_at(math.inf) == pytest.approx(106.0)
    clock.now = 105.5
    watch.solution(50.0)  # as good: no progress
    assert patience.stop_at(math.inf) == pytest.approx(106.0)
    watch.solution(49.0)
    assert patience.stop_at(math.inf) == pytest.approx(107.5)


def test_a_higher_bound_is_progress_the_same_bound_is_not(clock: Clock) -> None:
    patience = Patience(2.0)
    watch = GapWatch(patience)
    watch.bound_rose(0.0)
    watch.solution(100.0)
    clock.now = 101.0
    watch.bound_rose(0.5)  # CP-SAT proving the model
    assert patience.stop_at(math.inf) == pytest.approx(103.0)
    clock.now = 102.0
    watch.bound_rose(0.5)
    assert patience.stop_at(math.inf) == pytest.approx(103.0)


def test_a_bound_before_any_solution_is_not_progress(clock: Clock) -> None:
    patience = Patience(2.0)
    watch = GapWatch(patience)
    clock.now = 101.0
    watch.bound_rose(10.0)
    assert patience.stop_at(math.inf) == pytest.approx(102.0)


def test_with_a_gain_crumbs_are_not_progress_until_they_add_up(clock: Clock) -> None:
    patience = Patience(2.0, gain=0.01)
    patience.restart(1000.0)
    clock.now = 101.0
    patience.progress(995.0)  # 0.5% better: a crumb, the clock runs on
    assert patience.stop_at(math.inf) == pytest.approx(102.0)
    clock.now = 101.5
    patience.progress(989.0)  # 1.1% below the 1000 that last counted: progress
    assert patience.stop_at(math.inf) == pytest.approx(103.5)
    clock.now = 102.0
    patience.improved_by(5.0)  # 984: half a percent below 989, a crumb again
    assert patience.value == pytest.approx(984.0)
    assert patience.stop_at(math.inf) == pytest.approx(103.5)
    patience.improved_by(6.0)  # 978: 1.1% below 989
    assert patience.stop_at(math.inf) == pytest.approx(104.0)


def test_without_a_gain_any_better_decision_is_progress(clock: Clock) -> None:
    patience = Patience(2.0)
    patience.restart(1000.0)
    clock.now = 101.0
    patience.progress(999.999)
    assert patience.stop_at(math.inf) == pytest.approx(103.0)
    clock.now = 102.0
    # A search's own better decision, still above the round's: progress, as before
    # there was a gain (the search reports only what beats its own best).
    patience.progress(1000.5)
    assert patience.stop_at(math.inf) == pytest.approx(104.0)


def test_a_gain_in_a_cp_sat_search_is_measured_in_its_own_units(clock: Clock) -> None:
    patience = Patience(2.0, gain=0.01)
    patience.restart(5.0)  # the round's objective, in other units than the model's
    watch = GapWatch(patience)
    watch.solution(1000.0)  # the first solution: the search starts
    clock.now = 101.0
    watch.solution(995.0)
    assert patience.stop_at(math.inf) == pytest.approx(102.0)
    watch.solution(985.0)  # 1.5% below the first
    assert patience.stop_at(math.inf) == pytest.approx(103.0)
