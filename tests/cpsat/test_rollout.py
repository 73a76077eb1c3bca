"""A round's starts judged with the rest planned by the greedy (the rollout preset)."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.cpsat.model import CpSatPolicy
from whale_opt.cpsat.rollout import rolled_out
from whale_opt.decision import Action, Status, objective
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.solve import wspt_greedy


def _now(jobs: list) -> set:
    return {(i.id, i.action, i.gpu_ids) for i in jobs if i.action in (Action.START, Action.PREEMPT)}


@pytest.mark.parametrize(("family", "seed"), [("hetero", 1), ("dgx1", 2), ("fragmented", 3)])
def test_a_rolled_out_decision_keeps_the_starts_and_replans_the_rest(
    family: str, seed: int
) -> None:
    instance = generate(family, gpus=64, queued=24, seed=seed)
    order = wspt_order(instance)
    greedy = wspt_greedy(instance)
    # Another decision's starts: a searched round's.
    other = CpSatPolicy("deterministic").decide(instance, SolveOptions(time_limit_s=5))
    for jobs in (greedy, list(other.jobs)):
        rolled = rolled_out(instance, jobs, order, WsptPolicy.prefer)
        assert _now(rolled) == _now(jobs)
        assert (
            check(instance, assemble(instance, "rolled", rolled, Status.FEASIBLE, 0.0, 0.0)) == []
        )
    # The greedy, rolled out by itself, plans what waits as it did.
    assert objective(instance, rolled_out(instance, greedy, order, WsptPolicy.prefer)) == (
        pytest.approx(objective(instance, greedy))
    )


@pytest.mark.parametrize(("family", "seed"), [("hetero", 4), ("dgx1", 5), ("mixed", 6)])
def test_the_rollout_preset_keeps_a_search_result_only_when_its_starts_pay(
    family: str, seed: int
) -> None:
    instance = generate(family, gpus=64, queued=20, seed=seed)
    decision = CpSatPolicy("rollout").decide(instance, SolveOptions(time_limit_s=1.5))
    assert check(instance, decision) == []
    greedy = wspt_greedy(instance)
    order = wspt_order(instance)
    base = objective(instance, rolled_out(instance, greedy, order, WsptPolicy.prefer))
    mine = objective(instance, rolled_out(instance, list(decision.jobs), order, WsptPolicy.prefer))
    assert mine <= base * (1 + 1e-9)
    if decision.stats.get("rollout_rejected"):
        assert decision.status is Status.GREEDY_FALLBACK
        assert _now(list(decision.jobs)) == _now(greedy)
