"""Profile: usage over time as a step function, and its earliest-fit queries."""

from __future__ import annotations

import math
import random

import pytest

from whale_opt.placement import profile as profile_module
from whale_opt.placement.profile import Profile


def profile(*steps: tuple[int, int, float]) -> Profile:
    """A profile with ``amount`` added on each [start, end)."""
    out = Profile()
    for start, end, amount in steps:
        out.add(start, end, amount)
    return out


def test_an_empty_profile_is_zero_everywhere() -> None:
    empty = Profile()
    assert empty.level_at(0) == 0
    assert empty.level_at(10**9) == 0
    assert empty.peak(0, 10**9) == 0


def test_add_holds_on_its_half_open_interval() -> None:
    used = profile((10, 20, 2))
    assert (used.times, used.levels) == ([0, 10, 20], [0, 2, 0])
    assert [used.level_at(t) for t in (9, 10, 19, 20)] == [0, 2, 2, 0]


def test_empty_intervals_and_zero_amounts_change_nothing() -> None:
    used = profile((10, 10, 5), (20, 10, 5), (0, 50, 0))
    assert (used.times, used.levels) == ([0], [0])


def test_overlapping_adds_stack_and_negative_amounts_release() -> None:
    used = profile((0, 30, 1), (10, 20, 2), (15, 30, -1))
    assert [used.level_at(t) for t in (0, 10, 15, 20, 30)] == [1, 3, 2, 0, 0]


def test_peak_is_the_highest_level_on_a_half_open_window() -> None:
    used = profile((10, 20, 3), (25, 30, 1))
    assert used.peak(0, 10) == 0  # ends where the usage begins
    assert used.peak(0, 11) == 3
    assert used.peak(20, 25) == 0
    assert used.peak(19, 26) == 3
    assert used.peak(26, 100) == 1


def test_earliest_is_start_when_the_window_fits() -> None:
    used = profile((10, 20, 3))
    assert used.earliest(0, 5, 2, 4) == 0  # [0, 5) is clear
    assert used.earliest(8, 2, 2, 4) == 8  # [8, 10) ends as the usage begins
    assert used.earliest(0, 15, 1, 4) == 0  # 3 + 1 reaches the limit, no more


def test_earliest_jumps_past_each_block_in_turn() -> None:
    used = profile((10, 20, 3), (25, 40, 3))
    assert used.earliest(0, 15, 2, 4) == 40  # [0, 15) hits the first, [20, 35) the second
    assert used.earliest(0, 10, 2, 4) == 0
    assert used.earliest(5, 6, 2, 4) == 40  # [5, 11) and [20, 26) are both blocked
    assert used.earliest(12, 5, 2, 4) == 20  # starts inside a block: from its end, in the gap
    assert used.earliest(12, 6, 2, 4) == 40  # the gap is too short


def test_earliest_gives_up_and_refuses_what_never_fits() -> None:
    used = profile((10, 20, 3))
    assert used.earliest(0, 15, 2, 4, give_up=19) == math.inf
    assert used.earliest(0, 15, 2, 4, give_up=20) == 20
    assert used.earliest(0, 1, 5, 4) == math.inf  # more than the limit, ever
    assert profile((0, 10, 1)).earliest(0, 5, 4, 4) == 10


def test_earliest_tolerates_float_rounding_at_the_limit() -> None:
    used = profile((0, 10, 0.1), (0, 10, 0.1), (0, 10, 0.1))  # 0.30000000000000004
    assert used.earliest(0, 5, 0.7, 1.0) == 0
    assert used.earliest(0, 5, 0.71, 1.0) == 10


def test_a_copy_is_independent() -> None:
    used = profile((10, 20, 3))
    twin = used.copy()
    twin.add(0, 50, 1)
    assert used.level_at(30) == 0
    assert twin.level_at(30) == 1
    used.add(30, 40, 2)
    assert twin.level_at(35) == 1


def test_a_long_scan_goes_on_over_arrays_with_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(7)
    used = profile(*((t, t + rng.randint(1, 400), rng.randint(1, 6)) for t in range(0, 20_000, 90)))
    asks = [
        (rng.randint(0, 21_000), rng.randint(1, 3000), rng.randint(1, 8), rng.choice([5, 8, 12]))
        for _ in range(300)
    ]
    give_up = [rng.choice([math.inf, rng.randint(0, 25_000)]) for _ in asks]
    monkeypatch.setattr(profile_module, "LONG", 10**9)  # the list scan, to the end
    scanned = [used.earliest(*ask, g) for ask, g in zip(asks, give_up, strict=True)]
    monkeypatch.setattr(profile_module, "LONG", 3)  # arrays after three steps
    assert [used.earliest(*ask, g) for ask, g in zip(asks, give_up, strict=True)] == scanned
    assert any(t == math.inf for t in scanned) and any(t < math.inf for t in scanned)


def test_arrays_kept_up_to_date_by_adds_give_what_a_fresh_scan_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(profile_module, "LONG", 3)
    rng = random.Random(11)
    adds = [
        (rng.randint(0, 9000), rng.randint(1, 900), rng.choice([-1, 1, 2, 0.5])) for _ in range(120)
    ]
    asks = [(rng.randint(0, 9500), rng.randint(1, 2000), rng.randint(1, 6), 8) for _ in range(40)]
    used, fresh = Profile(), Profile()
    twin = used
    for k, (start, length, amount) in enumerate(adds):
        used.add(start, start + length, amount)
        fresh.add(start, start + length, amount)
        answers = [used.earliest(*ask) for ask in asks]  # builds (then reuses) the arrays
        drops = used.drops()
        if k == 60:
            twin = used.copy()  # shares the arrays until either changes
            frozen = answers
        monkeypatch.setattr(profile_module, "LONG", 10**9)
        assert answers == [fresh.earliest(*ask) for ask in asks]
        assert drops == fresh.drops()
        monkeypatch.setattr(profile_module, "LONG", 3)
    assert [twin.earliest(*ask) for ask in asks] == frozen


def test_a_profile_built_at_once_from_ends_is_the_one_adds_make_to_the_bit() -> None:
    rng = random.Random(7)
    for _ in range(200):
        usage = [
            (rng.choice([0, -5, *range(1, 40)]), rng.choice([0, 1, 0.1, 0.7, 8, 1 / 3]))
            for _ in range(rng.randrange(12))
        ]
        built = Profile.until(usage)
        added = profile(*((0, end, amount) for end, amount in usage))
        assert (built.times, built.levels) == (added.times, added.levels)
