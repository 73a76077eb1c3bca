"""The CP-SAT policy keeps no round state: one object serves several threads, and
what a round did travels in its decision's ``stats``."""

from __future__ import annotations

import threading

import jsonschema
import pytest

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy
from whale_opt.decision import Decision, Status
from whale_opt.generate import generate
from whale_opt.io import InputError, decision_from_dict, decision_to_dict, schema
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance

# Generous: the deterministic preset's fixed counts end the round well before
# this wall-clock safety net, even with two rounds sharing the cores.
OPTIONS = SolveOptions(time_limit_s=30.0)
TIMED = {"greedy_s", "exact_s", "bound_s"}  # wall-clock figures, different on every run


def _rounds() -> list[Instance]:
    """Rounds where the LNS runs and improves (so there is state to share)."""
    return [
        generate("mixed", gpus=32, queued=12, seed=0),
        generate("dgx1", gpus=32, queued=12, seed=0),
    ]


def _outcome(decision: Decision) -> tuple[object, ...]:
    """Everything a decision decides, and its untimed figures."""
    stats = {key: value for key, value in decision.stats.items() if key not in TIMED}
    return decision.objective, decision.status, decision.jobs, tuple(sorted(stats.items()))


def test_two_threads_sharing_one_policy_decide_as_sequential_solves() -> None:
    rounds = _rounds()
    sequential = [_outcome(CpSatPolicy("deterministic").decide(r, OPTIONS)) for r in rounds]
    shared = CpSatPolicy("deterministic")
    orders = [list(range(len(rounds))), list(reversed(range(len(rounds))))]
    results: dict[tuple[int, int], tuple[object, ...]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(orders))

    def work(thread: int) -> None:
        try:
            start.wait()
            for k in orders[thread]:
                results[thread, k] = _outcome(shared.decide(rounds[k], OPTIONS))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(orders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for (_, k), outcome in results.items():
        assert outcome == sequential[k]
    assert len(results) == len(orders) * len(rounds)


def test_a_small_round_is_solved_as_one_model_and_proven() -> None:
    instance = _rounds()[0]  # 12 queued jobs: one exact model
    decision = CpSatPolicy("deterministic").decide(instance, OPTIONS)
    stats = decision.stats
    assert check(instance, decision) == []
    assert stats["exact_tried"] == stats["exact_proven"] == 1
    assert decision.status is Status.OPTIMAL
    assert stats["lns_rounds"] == 0  # it returned the moment the model was proven
    assert decision.bound <= decision.objective <= stats["greedy_value"]


def test_round_figures_are_in_the_decision() -> None:
    # Past the preset's exact_jobs (64): the order search and the LNS do the work.
    instance = generate("mixed", gpus=64, queued=80, seed=0)
    decision = CpSatPolicy("deterministic").decide(instance, OPTIONS)
    stats = decision.stats
    assert check(instance, decision) == []
    assert stats["exact_tried"] == 0
    assert stats["greedy_value"] >= stats["search_value"] >= decision.objective
    assert stats["lns_rounds"] >= stats["lns_optimal"] >= 0
    assert stats["lns_rounds"] >= 1
    by_strategy = sum(v for k, v in stats.items() if k.startswith("lns_improved_"))
    assert by_strategy == stats["lns_improvements"]
    assert stats["improved"] == 1
    assert stats["fallback"] == 0
    assert stats["pricing_gap"] <= 1e-6 * max(1.0, decision.objective)
    assert all(_is_number(value) for value in stats.values())


def test_stats_travel_through_decision_json_and_pass_the_schema() -> None:
    decision = CpSatPolicy("fast").decide(_rounds()[0], SolveOptions(time_limit_s=0.5))
    raw = decision_to_dict(decision)
    jsonschema.validate(raw, schema("decision"))
    assert raw["stats"] == dict(decision.stats)
    assert decision_from_dict(raw).stats == decision.stats


def test_a_decision_without_stats_writes_none() -> None:
    decision = CpSatPolicy("fast").decide(_rounds()[0], SolveOptions(time_limit_s=0.5))
    raw = decision_to_dict(decision.with_changes(stats={}))
    assert "stats" not in raw
    assert decision_from_dict(raw).stats == {}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_a_stat_that_is_not_a_number_is_a_file_error() -> None:
    decision = CpSatPolicy("fast").decide(_rounds()[0], SolveOptions(time_limit_s=0.5))
    raw = {**decision_to_dict(decision), "stats": {"lns_rounds": "eight"}}
    with pytest.raises(InputError, match="stats"):
        decision_from_dict(raw, "round.json")
