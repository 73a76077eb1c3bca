"""A round's steps that cannot be stopped half way start only with time for them.

Building a model, listing a whole round's choices, a neighbourhood's timeline
and the order search's first listing of its orders each run to their end
once started: a round starts each only when what it is expected to take is
left before its deadline, so the round ends within its limit.
"""

from __future__ import annotations

import time

import pytest

from whale_opt.check import check
from whale_opt.cpsat import lns, model
from whale_opt.cpsat.lns import LnsStats, exact_round
from whale_opt.cpsat.model import CpSatPolicy
from whale_opt.cpsat.presets import load_preset
from whale_opt.decision import objective
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.solve import wspt_greedy


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("started with no time for it")


def test_a_whole_round_model_without_time_to_build_it_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building a model cannot be stopped half way: with no time left for it,
    # the whole round's model is not built and the decision comes back as it was;
    # its choices are not even listed (a pool given 0.05 s spent 0.2 s on them).
    instance = generate("hetero", gpus=256, queued=16, seed=3)
    jobs = wspt_greedy(instance)
    value = objective(instance, jobs)
    preset = load_preset(None)
    stats = LnsStats()
    with monkeypatch.context() as patch:
        patch.setattr(lns, "make_neighbourhood", _never)
        out = exact_round(
            instance, jobs, value, time.perf_counter(), preset, preset.parameters, 0, stats
        )
    assert out == (jobs, value, False)
    assert (stats.exact_tried, stats.exact_skipped, stats.exact_s) == (1, 1, 0.0)
    # With the time, it is built and solved.
    stats = LnsStats()
    exact_round(instance, jobs, value, time.perf_counter() + 2, preset, preset.parameters, 0, stats)
    assert stats.exact_skipped == 0 and stats.exact_s > 0


def test_the_order_search_is_not_started_without_time_for_its_first_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its first step lists the greedy's order again, which cannot be stopped half
    # way: with no time left after the greedy it would take the round past its limit.
    instance = generate("hetero", gpus=256, queued=300, seed=4)
    monkeypatch.setattr(model, "improve", _never)
    options = SolveOptions(time_limit_s=0.001, report_bound=False)
    decision = CpSatPolicy().decide(instance, options)
    assert "search_error" not in decision.stats  # the search was not started and failed
    assert check(instance, decision) == []


def test_no_neighbourhood_starts_without_time_for_its_timeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A neighbourhood's timeline holds every queued and running job (0.3-0.5 s on
    # 10,000 GPUs): the first one is not started with less than that left, which
    # is more than the floor kept for later ones once they are timed.
    instance = generate("hetero", gpus=1024, queued=500, seed=900)
    preset = load_preset(None)
    expected = lns.first_overhead(instance, preset)
    assert expected > 2 * lns.MIN_OVERHEAD_S
    assert lns.first_overhead(generate("hetero", gpus=64, queued=4, seed=900), preset) < expected
    jobs = wspt_greedy(instance)
    value = objective(instance, jobs)
    monkeypatch.setattr(lns, "make_neighbourhood", _never)
    deadline = time.perf_counter() + expected / 2
    out = lns.large_neighbourhood_search(
        instance, jobs, value, 0.0, deadline, preset, preset.parameters, 0
    )
    assert out == (jobs, value)
