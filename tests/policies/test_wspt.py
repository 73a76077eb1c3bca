"""The greedy on named instances: checked, sensible, and what it promises."""

from __future__ import annotations

from whale_opt.check import check
from whale_opt.decision import Action
from whale_opt.problem_data import Instance
from whale_opt.registry import get_policy


def test_small_instance_decision_passes_the_checker(small: Instance) -> None:
    decision = get_policy("wspt").decide(small)
    assert check(small, decision) == []
    assert decision.bound <= decision.objective


def test_unservable_jobs_are_deferred_with_a_reason(small: Instance) -> None:
    decision = get_policy("wspt").decide(small)
    q6 = decision.job("q6")  # asks for 100 GB GPUs; the largest has 80 GB
    assert q6.action is Action.DEFERRED
    assert q6.reason is not None and "100 GB" in q6.reason


def test_started_jobs_get_exact_free_gpus(small: Instance) -> None:
    decision = get_policy("wspt").decide(small)
    held = {gpu for job in small.running for gpu in job.gpu_ids}
    for item in decision.by_action(Action.START):
        assert item.start_s == 0
        assert not held & set(item.gpu_ids)
