"""The orders the Lagrangian relaxation's prices give are more starts of the order search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.cpsat import model
from whale_opt.cpsat.model import GUIDED_BLENDS, guided_count
from whale_opt.decision import Status
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.order_search import TypedOrder, blend_orders
from whale_opt.policies.wspt import wspt_order
from whale_opt.solve import solve


class _Recorded:
    """What one round's search was given: the orders each order search started
    from, the guided orders made, and the Lagrangian bound's runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.searched: list[list[list[int] | TypedOrder]] = []
        self.guided: list[list[int]] = []
        self.relaxed: list[Any] = []
        improve, by_starts, relax = model.improve, model.order_by_starts, model.solve_lagrangian

        def improving(instance: Any, orders: Sequence[Any], *args: Any) -> Any:
            self.searched.append(
                [order if isinstance(order, TypedOrder) else list(order) for order in orders]
            )
            return improve(instance, orders, *args)

        def ordering(*args: Any) -> list[int]:
            self.guided.append(by_starts(*args))
            return self.guided[-1]

        def relaxing(*args: Any) -> Any:
            self.relaxed.append(relax(*args))
            return self.relaxed[-1]

        monkeypatch.setattr(model, "improve", improving)
        monkeypatch.setattr(model, "order_by_starts", ordering)
        monkeypatch.setattr(model, "solve_lagrangian", relaxing)


# A loaded round (64 GPUs, 16 queued) its whole model leaves some 15% from proven at 5 s.
LOADED = generate("fragmented", gpus=64, queued=16, seed=502)


def test_an_unproven_round_also_searches_from_the_blends_of_the_relaxations_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = _Recorded(monkeypatch)
    decision = solve(LOADED, "cpsat", SolveOptions(time_limit_s=2.0))
    assert check(LOADED, decision) == []
    assert decision.status is not Status.OPTIMAL, "the round was proven: pick a harder one"
    (relaxed,) = recorded.relaxed
    (guided,) = recorded.guided
    (orders,) = recorded.searched
    greedy = wspt_order(LOADED)
    assert orders[0] == greedy
    # Its jobs may run on several types: the typed orders are among them, with the
    # type the relaxation picked for each job it placed.
    assert any(len(LOADED.durations[k]) > 1 for k in relaxed.types)
    assert relaxed.types and set(relaxed.types) <= set(relaxed.starts)
    expected: list[list[int] | TypedOrder] = [greedy]
    for share, typed in GUIDED_BLENDS:
        blended = blend_orders(greedy, guided, share)
        order = TypedOrder(blended, relaxed.types) if typed else blended
        if order not in expected:
            expected.append(order)
    count = int(decision.stats["guided_orders"])
    assert count >= 2
    assert orders == expected[: 1 + count]
    assert any(isinstance(order, TypedOrder) for order in orders)
    assert decision.objective <= decision.stats["greedy_value"] + 1e-6


def test_a_deterministic_round_leaves_the_time_bound_prices_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The ascent stops at a wall-clock deadline: its prices must not decide a round
    # that reruns identically.
    recorded = _Recorded(monkeypatch)
    decision = solve(LOADED, "cpsat", SolveOptions(time_limit_s=2.0, preset="deterministic"))
    assert check(LOADED, decision) == []
    assert len(recorded.relaxed) == 1  # the bound ran ...
    assert recorded.searched == [[wspt_order(LOADED)]]  # ... and the search took no order of it
    assert "guided_orders" not in decision.stats


@pytest.mark.parametrize(
    ("spare", "search_share", "given", "expected"),
    [
        (100.0, 0.5, 1, len(GUIDED_BLENDS)),  # time for all of them
        (10.0, 0.5, 1, 2),  # a fifth of the time holds two list schedules
        (5.5, 0.5, 1, 0),  # one would fit a fifth, but then the search would not start
        (10.0, 0.5, 2, 1),  # a hint besides: the search's listing leaves room for one
        (-7.0, 0.5, 1, 0),  # the bound ran past the deadline: none, not a negative count
    ],
)
def test_the_guided_orders_never_crowd_out_the_order_search(
    spare: float, search_share: float, given: int, expected: int
) -> None:
    # In units of one list schedule (greedy_s = 1 s).
    count = guided_count(spare, search_share, 1.0, given)
    assert count == expected
    # The search still lists every order and one more within its share of the time.
    assert count == 0 or (given + count + 1) < search_share * spare
