"""The list-order search: never worse than its starting orders, checked, and a counted
search makes all its moves."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.decision import Status, objective
from whale_opt.generate import generate
from whale_opt.placement import order_search
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.policies.wspt import wspt_order


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the schedules the search generates."""
    runs = [0]
    run = order_search.OrderSearch.run

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        runs[0] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(order_search.OrderSearch, "run", counting)
    return runs


def test_the_search_is_never_worse_than_its_orders_and_checked() -> None:
    instance = generate("hetero", gpus=64, queued=24, seed=3)
    order = wspt_order(instance)
    start = objective(instance, list_schedule(instance, order))
    jobs, value = order_search.improve(instance, [order], deadline=float("inf"), moves=40)
    assert value <= start
    assert value == pytest.approx(objective(instance, jobs))
    decision = assemble(instance, "search", jobs, Status.FEASIBLE, 0.0, 0.0)
    assert check(instance, decision) == []


def test_a_counted_search_makes_all_its_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    instance = generate("hetero", gpus=256, queued=4, seed=1)
    runs = _counted(monkeypatch)
    order_search.improve(instance, [wspt_order(instance)], deadline=float("inf"), moves=300)
    # Every move that changes the order is evaluated.
    assert runs[0] > 1 + 300 * 0.5
