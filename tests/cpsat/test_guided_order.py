"""The orders the Lagrangian relaxation's prices give are more starts of the order search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.cpsat import model
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.policies.wspt import wspt_order
from whale_opt.solve import solve


def _orders_searched(monkeypatch: pytest.MonkeyPatch) -> list[list[list[int]]]:
    """Record the orders each order search starts from."""
    seen: list[list[list[int]]] = []
    improve = model.improve

    def recording(instance: Any, orders: Sequence[Sequence[int]], *args: Any) -> Any:
        seen.append([list(order) for order in orders])
        return improve(instance, orders, *args)

    monkeypatch.setattr(model, "improve", recording)
    return seen


def test_an_unproven_round_also_searches_from_the_relaxations_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A loaded round its whole model does not prove: the Lagrangian bound runs, and
    # the starts its prices pick order the queue once more.
    instance = generate("fragmented", gpus=64, queued=16, seed=502)
    seen = _orders_searched(monkeypatch)
    decision = solve(instance, "cpsat", SolveOptions(time_limit_s=2.0))
    assert check(instance, decision) == []
    assert decision.stats["guided_orders"] >= 1
    (orders,) = seen
    greedy = wspt_order(instance)
    assert orders[0] == greedy
    assert len(orders) == 1 + decision.stats["guided_orders"]
    for order in orders[1:]:
        assert order != greedy and sorted(order) == sorted(greedy)
    assert decision.objective <= decision.stats["greedy_value"] + 1e-6


def test_a_deterministic_round_leaves_the_time_bound_prices_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The ascent stops at a wall-clock deadline: its prices must not decide a round
    # that reruns identically.
    instance = generate("fragmented", gpus=64, queued=16, seed=502)
    seen = _orders_searched(monkeypatch)
    decision = solve(instance, "cpsat", SolveOptions(time_limit_s=2.0, preset="deterministic"))
    assert check(instance, decision) == []
    assert "guided_orders" not in decision.stats
    assert all(orders == [wspt_order(instance)] for orders in seen)
