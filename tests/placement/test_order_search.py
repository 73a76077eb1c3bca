"""The list-order search: never worse than its starting orders, checked, and a counted
search makes all its moves."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.decision import JobDecision, Status, job_nodes, objective
from whale_opt.generate import generate
from whale_opt.placement import order_search
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob


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


def test_an_order_by_starts_puts_the_given_starts_first_then_the_decisions() -> None:
    instance = generate("hetero", gpus=64, queued=6, seed=3)
    order = wspt_order(instance)
    jobs = list_schedule(instance, order)
    index = instance.queue_index
    at = {index[item.id]: item.start_s for item in jobs if item.id in index}
    # Two jobs given starts: one far out, one now; the rest keep their scheduled starts.
    far, now = order[0], order[-1]
    guided = order_search.order_by_starts(instance, {far: 10.0**9, now: -1.0}, jobs, order)
    assert sorted(guided) == sorted(order)
    assert guided[0] == now
    assert guided[-1] == far
    middle = guided[1:-1]
    starts = [at[k] if at[k] is not None else float("inf") for k in middle]
    assert starts == sorted(starts)
    # Equal starts keep the given order's order.
    ties = [k for k in middle if at[k] == starts[0]]
    assert ties == [k for k in order if k in ties]


def test_a_blend_of_two_orders_moves_between_them() -> None:
    first, second = [0, 1, 2, 3], [3, 2, 1, 0]
    assert order_search.blend_orders(first, second, 0.0) == first
    assert order_search.blend_orders(first, second, 1.0) == second
    # Half way every mixed rank is 1.5: the first order's order breaks the ties.
    assert order_search.blend_orders(first, second, 0.5) == first
    # Pairs swapped in the second order: a quarter of the way the first still wins
    # (0 at 0.25 before 1 at 0.75), three quarters of the way the second does.
    assert order_search.blend_orders([0, 1, 2, 3], [1, 0, 3, 2], 0.25) == [0, 1, 2, 3]
    assert order_search.blend_orders([0, 1, 2, 3], [1, 0, 3, 2], 0.75) == [1, 0, 3, 2]


def _two_types() -> Instance:
    # One 8-GPU node of each type; every job runs twice as fast on the A100s.
    types = {"A100": GpuType("A100", 80, 1.0), "V100": GpuType("V100", 32, 0.5)}
    nodes = (Node("a", "A100", 8, "nvswitch"), Node("v", "V100", 8, "nvswitch"))
    queue = tuple(
        QueuedJob(f"q{i}", 4, 1000, duration_by_type_s=(("V100", 2000),)) for i in range(3)
    )
    return Instance("two-types", types, nodes, (), queue)


def _type_of(instance: Instance, item: JobDecision) -> str:
    (node,) = job_nodes(item)
    return next(n.gpu_type for n in instance.nodes if n.id == node)


def test_a_typed_order_holds_its_jobs_to_their_types_and_the_search_keeps_them() -> None:
    instance = _two_types()
    order = [0, 1, 2]
    free = list_schedule(instance, order)
    assert [_type_of(instance, item) for item in free] == ["A100", "A100", "A100"]
    # Job 0 held to the V100s runs there, though it would end earlier on the A100s;
    # a type a job cannot run on holds it nowhere.
    types = {0: "V100", 1: "H100"}
    held = order_search.OrderSearch(instance).run(order, types=types)[0]
    assert [_type_of(instance, item) for item in held] == ["V100", "A100", "A100"]
    assert check(instance, assemble(instance, "typed", held, Status.FEASIBLE, 0.0, 0.0)) == []
    # The search's moves keep the types: every schedule it tries has job 0 on the V100s.
    jobs, value = order_search.improve(
        instance, [order_search.TypedOrder(order, types)], deadline=float("inf"), moves=30
    )
    by_id = {item.id: item for item in jobs}
    assert _type_of(instance, by_id["q0"]) == "V100"
    assert value == objective(instance, jobs)
