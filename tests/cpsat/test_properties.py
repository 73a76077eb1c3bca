"""Properties of the CP-SAT round on generated instances, presets and the time limit."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy, presets
from whale_opt.cpsat.presets import load_preset
from whale_opt.decision import Action, Decision
from whale_opt.generate import generate
from whale_opt.io import read_instance
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance
from whale_opt.registry import get_policy
from whale_opt.testing import instances

from . import builders
from .builders import TOLERANCE, assert_priced_exactly, model_from, solve_model

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


def _job_decisions(decision: Decision) -> tuple[tuple[object, ...], ...]:
    return tuple(
        (item.id, item.action, item.gpu_ids, item.start_s, item.end_s, item.nodes, item.node_gpus)
        for item in decision.jobs
    )


@settings(max_examples=25, deadline=None)
@given(instances(max_nodes=3, max_queue=4, max_running=3))
def test_cpsat_decision_is_valid_complete_and_never_worse_than_the_greedy(
    instance: Instance,
) -> None:
    # Short: with preemption possible the bound is 0, so the search runs to the limit.
    options = SolveOptions(time_limit_s=0.1)
    decision = CpSatPolicy().decide(instance, options)
    greedy = get_policy("wspt").decide(instance, options)
    assert check(instance, decision) == []
    assert decision.objective <= greedy.objective + TOLERANCE
    assert decision.bound <= decision.objective + TOLERANCE
    counts = Counter(item.id for item in decision.jobs)
    assert counts == Counter(job.id for job in (*instance.queue, *instance.running))
    for job in instance.queue:
        assert decision.job(job.id).action in (Action.START, Action.PLANNED, Action.DEFERRED)


@settings(max_examples=25, deadline=None)
@given(instances(max_nodes=3, max_queue=4, max_running=3))
def test_model_alone_with_every_job_freed_is_valid_and_never_worse(instance: Instance) -> None:
    # The round solves the model only when the greedy is not proven optimal;
    # here it always does (solve_model checks validity, optimality, greedy).
    solve_model(instance)


@pytest.mark.parametrize("gpus, queued, seed", [(32, 8, 0), (24, 6, 1)])
def test_deterministic_preset_gives_the_same_decision_on_reruns(
    gpus: int, queued: int, seed: int
) -> None:
    # Small enough that the preset's fixed move and round counts finish well
    # inside the wall-clock safety net, big enough that the search improves on
    # the greedy (so there is something to be nondeterministic about).
    instance = generate("mixed", gpus=gpus, queued=queued, seed=seed)
    runs = [
        CpSatPolicy("deterministic").decide(instance, SolveOptions(time_limit_s=2.0))
        for _ in range(3)
    ]
    assert all(check(instance, run) == [] for run in runs)
    assert (
        runs[0].objective
        < get_policy("wspt").decide(instance, SolveOptions(time_limit_s=2.0)).objective
    )
    assert len({_job_decisions(run) for run in runs}) == 1
    assert len({run.objective for run in runs}) == 1


def test_unknown_preset_raises_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="nope") as error:
        CpSatPolicy("nope")
    for known in ("default", "deterministic", "fast"):
        assert known in str(error.value)
    with pytest.raises(ValueError, match="deterministic"):
        get_policy("cpsat", preset="nope")


def test_a_preset_with_a_base_is_that_preset_with_its_own_keys_over_it() -> None:
    default, quick, fast = (load_preset(name) for name in ("default", "quick", "fast"))
    own = {"patience_share": 0.0, "patience_gain": 0.0, "round_limit_s": default.round_limit_s}
    assert dataclasses.replace(quick, name="default", **own) == default
    assert quick.round_limit_s < default.round_limit_s
    assert fast.parameters == {**default.parameters, "max_presolve_iterations": 1}
    assert fast.nodes_per_job == 4
    assert dataclasses.replace(fast, parameters=default.parameters, nodes_per_job=6) == (
        dataclasses.replace(default, name="fast")
    )


def test_a_preset_whose_bases_loop_or_are_missing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.toml").write_text('base = "b"\n')
    (tmp_path / "b.toml").write_text('base = "a"\n')
    (tmp_path / "c.toml").write_text('base = "gone"\n')
    monkeypatch.setattr(presets, "_folder", lambda: tmp_path)
    with pytest.raises(ValueError, match="loop"):
        load_preset("a")
    with pytest.raises(ValueError, match="gone"):
        load_preset("c")


def test_round_keeps_to_its_time_limit_on_the_fragmented_instance() -> None:
    path = INSTANCES / "fragmented" / "fragmented-256g-120q.json"
    instance = read_instance(path)
    decision = CpSatPolicy().decide(instance, SolveOptions(time_limit_s=1.0))
    assert decision.wall_s <= 1.5
    assert check(instance, decision) == []
    assert decision.objective <= get_policy("wspt").decide(instance).objective + TOLERANCE


@settings(max_examples=15, deadline=None)
@given(
    instances(
        max_nodes=3, max_queue=4, max_running=3, priority=True, preemption=True, preferences=True
    )
)
def test_cpsat_with_classes_preferences_and_preemption_is_valid_and_never_worse_than_wspt(
    instance: Instance,
) -> None:
    options = SolveOptions(time_limit_s=0.05)
    policy = CpSatPolicy()
    decision = policy.decide(instance, options)
    assert check(instance, decision) == []
    assert decision.objective <= get_policy("wspt").decide(instance).objective + TOLERANCE
    assert_priced_exactly(decision)


@st.composite
def contested(draw: st.DrawFn) -> Instance:
    """Generated rounds where queued work outranks preemptible running work."""
    instance = draw(
        instances(
            max_nodes=3,
            max_queue=4,
            max_running=4,
            min_queue=1,
            preemption=True,
            preferences=draw(st.booleans()),
            draining=draw(st.booleans()),
        )
    )
    lower = st.sampled_from(["best-effort", "best-effort", "training"])
    higher = st.sampled_from(["training", "online", "best-effort"])
    running = tuple(
        dataclasses.replace(held, priority_class=draw(lower), preemptible=True)
        for held in instance.running
    )
    queue = tuple(dataclasses.replace(q, priority_class=draw(higher)) for q in instance.queue)
    policy = dataclasses.replace(instance.policy, min_run_s=0)
    return instance.replace(running=running, queue=queue, policy=policy)


@settings(max_examples=20, deadline=None)
@given(contested())
def test_model_from_the_greedy_decides_victims_validly_at_the_price_it_optimised(
    instance: Instance,
) -> None:
    # The greedy may preempt; the model frees every queued job and the victims
    # they may displace, and must return a valid decision whose re-priced share
    # is what it optimised (model_from checks both).
    greedy = get_policy("wspt").decide(instance)
    model_from(instance, list(greedy.jobs), time_limit_s=0.2)


def test_a_round_its_model_cannot_hold_keeps_the_decision_before_the_search(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 10^18 s of work overflows CP-SAT's 64-bit coefficients: the round does not
    # raise; the greedy's decision stands, checked, and the stats and log say why.
    instance = builders.round_of(
        [builders.node("n0")], [builders.job("j0", 8, 10**18), builders.job("j1", 8)]
    )
    decision = CpSatPolicy().decide(instance, SolveOptions(time_limit_s=2.0))
    assert check(instance, decision) == []
    assert decision.stats["search_error"] == 1
    assert decision.objective == get_policy("wspt").decide(instance).objective
    assert "cpsat search failed" in caplog.text


def test_a_model_cp_sat_refuses_is_counted_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each number within an instance file's ranges, together past CP-SAT's 64-bit
    # objective: a weight of 10^9 aged 10^9 per hour over 31 years. CP-SAT refuses
    # every model; the heuristics decide, and the round says so.
    instance = builders.round_of(
        [builders.node("n0"), builders.node("n1")],
        [builders.job(f"j{k}", 8, 3600, weight=1e9, submitted_at=-(10**9)) for k in range(4)],
        aging_per_hour=1e9,
    )
    decision = CpSatPolicy().decide(instance, SolveOptions(time_limit_s=1.0))
    assert check(instance, decision) == []
    assert decision.stats["cpsat_rejected"] >= 1
    assert "search_error" not in decision.stats
    warnings = [r.getMessage() for r in caplog.records if "CP-SAT refused" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "(invalid model)" not in warnings[0]  # CP-SAT's own reason is passed on
    assert decision.objective <= get_policy("wspt").decide(instance).objective
