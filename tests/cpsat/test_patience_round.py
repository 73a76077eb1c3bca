"""A round's search ends once it stops finding better (the round's patience)."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from whale_opt.check import check
from whale_opt.cpsat.cpmodel import NeighbourhoodModel
from whale_opt.cpsat.lns import _merge, whole_neighbourhood
from whale_opt.cpsat.model import CpSatPolicy, patience_seconds
from whale_opt.cpsat.presets import Preset, load_preset
from whale_opt.decision import Status
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.patience import Patience
from whale_opt.placement.serial import assemble
from whale_opt.solve import wspt_greedy


def test_a_cp_sat_search_without_progress_is_stopped_long_before_its_limit() -> None:
    # A 16-job round whose proof takes CP-SAT seconds after its last better
    # solution: with only solutions counted as progress, patience stops it.
    instance = generate("hetero", gpus=64, queued=16, seed=100)
    greedy = wspt_greedy(instance)
    hood, incumbent, preempted = whole_neighbourhood(instance, greedy)
    patience = Patience(0.3)
    started = time.perf_counter()
    result = NeighbourhoodModel(hood).solve(load_preset(None).parameters, 30.0, 0, None, patience)
    assert time.perf_counter() - started < 15.0
    assert patience.stalled
    assert result is not None and not result.proved
    jobs, _ = _merge(instance, incumbent, preempted, hood, result)
    decision = assemble(instance, "cpsat", jobs, Status.FEASIBLE, 0.0, started)
    assert check(instance, decision) == []


@pytest.mark.parametrize("family", ["hetero", "fragmented"])
def test_a_round_that_stops_improving_returns_early_with_a_checked_decision(family: str) -> None:
    instance = generate(family, gpus=256, queued=120, seed=7)
    policy = CpSatPolicy()
    policy.preset = dataclasses.replace(policy.preset, patience_share=0.02)
    decision = policy.decide(instance, SolveOptions(time_limit_s=30.0))
    assert check(instance, decision) == []
    assert decision.objective <= decision.stats["greedy_value"] + 1e-6
    assert decision.stats["stalled"] == 1
    assert decision.wall_s < 25.0


def test_a_round_whose_gains_are_crumbs_ends_at_its_patience() -> None:
    # A gain of the whole objective: no better decision counts as progress, so each
    # search ends one patience (0.6 s) after it starts, whatever it still finds.
    instance = generate("hetero", gpus=256, queued=120, seed=7)
    policy = CpSatPolicy()
    policy.preset = dataclasses.replace(policy.preset, patience_share=0.02, patience_gain=1.0)
    decision = policy.decide(instance, SolveOptions(time_limit_s=30.0))
    assert check(instance, decision) == []
    assert decision.objective <= decision.stats["greedy_value"] + 1e-6
    assert decision.stats["stalled"] == 1
    assert decision.wall_s < 10.0


def test_the_quick_preset_has_a_patience_and_the_others_have_none() -> None:
    assert load_preset("quick").patience_share > 0
    assert load_preset("quick").patience_gain > 0
    assert load_preset("default").patience_gain == 0
    assert load_preset("default").patience_share == 0
    assert load_preset("deterministic").patience_share == 0
    with pytest.raises(ValueError, match="deterministic with a patience"):
        Preset("x", {}, deterministic=True, patience_share=0.1)


def test_the_patience_is_a_share_of_the_limit_but_lets_a_neighbourhood_search() -> None:
    preset = load_preset("quick")
    assert patience_seconds(preset, 20.0) == pytest.approx(preset.patience_share * 20.0)
    assert patience_seconds(preset, 0.5) == pytest.approx(0.5 * preset.round_limit_s)
    assert patience_seconds(load_preset("deterministic"), 20.0) == math.inf
