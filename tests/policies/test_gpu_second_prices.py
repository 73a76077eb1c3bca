"""A price on a GPU type's GPU-seconds (``policy.gpu_second_prices``): every solver
weighs it against the job's end, the objective and the checker charge it, and a
bad price is an input error that names it."""

from __future__ import annotations

import json
import time

import pytest

from whale_opt.bounds import lagrangian_bound, lower_bound, trivial_bound
from whale_opt.check import check
from whale_opt.decision import Action, least_usage, objective
from whale_opt.io.files import InputError
from whale_opt.io.instance import instance_from_dict, instance_to_dict
from whale_opt.problem_data import FieldError, GpuType, Instance, Node, Policy, QueuedJob
from whale_opt.registry import REGISTRY, get_policy
from whale_opt.solve import solve

HEURISTICS = sorted(name for name in REGISTRY if name not in ("greedy", "learned"))
# The fast type runs the job in 1,000 s, the slow one in 2,000 s.
TYPES = {"fast": GpuType("fast", 80.0, speed=2.0), "slow": GpuType("slow", 80.0)}
NODES = (Node("f0", "fast", 8, "nvswitch"), Node("s0", "slow", 8, "nvswitch"))


def round_of(
    *queue: QueuedJob,
    price: float | None = None,
    prices: dict[str, float] | None = None,
    nodes: tuple[Node, ...] = NODES,
) -> Instance:
    """A round of ``queue`` on ``nodes``, the fast type priced at ``price`` (or ``prices``)."""
    if prices is None:
        prices = {} if price is None else {"fast": price}
    return Instance(
        name="prices",
        gpu_types=TYPES,
        nodes=nodes,
        queue=queue,
        policy=Policy(gpu_second_prices=prices),
    )


def type_of(instance: Instance, name: str, job_id: str = "j") -> str:
    decision = get_policy(name).decide(instance)
    assert check(instance, decision) == [], name
    item = decision.job(job_id)
    assert item.action is Action.START
    return instance.nodes[instance.parse_gpu(item.gpu_ids[0]).node].gpu_type


# 4 GPUs: on the fast type 1,000 s + price x 4,000 GPU-s; on the slow one 2,000 s.
# The two cost the same at a price of 0.25.
@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize(("price", "expected"), [(None, "fast"), (0.2, "fast"), (0.3, "slow")])
def test_a_priced_type_is_taken_only_while_its_speed_is_worth_the_price(
    name: str, price: float | None, expected: str
) -> None:
    instance = round_of(QueuedJob("j", 4, 2000), price=price)
    if getattr(get_policy(name), "prefer", "end") != "end" and price is not None:
        # Earliest-start rules add the price to the start: any price sends the job
        # to an unpriced type that starts it as soon (unpriced, both tie and f0 wins).
        expected = "slow"
    assert type_of(instance, name) == expected


def test_the_objective_charges_the_gpu_seconds_on_the_priced_type() -> None:
    instance = round_of(QueuedJob("j", 4, 2000, weight=2.0), price=0.2)
    decision = get_policy("wspt").decide(instance)
    item = decision.job("j")
    # weight x end + price x GPUs x seconds on the type (not times the weight).
    assert objective(instance, decision.jobs) == pytest.approx(2.0 * 1000 + 0.2 * 4 * 1000)
    assert decision.objective == pytest.approx(objective(instance, decision.jobs))
    assert item.end_s == 1000


def test_a_share_of_a_gpu_pays_its_fraction() -> None:
    shared = QueuedJob("j", 1, 2000, gpu_milli=250)
    instance = round_of(shared, price=1.0)
    decision = get_policy("wspt").decide(instance)
    # On the fast type: 1,000 s + 1.0 x 0.25 GPU x 1,000 s = 1,250 < 2,000 on the slow one.
    assert objective(instance, decision.jobs) == pytest.approx(1250.0)
    assert check(instance, decision) == []


def test_cpsat_proves_the_priced_round_and_its_bound_holds() -> None:
    queue = (QueuedJob("a", 8, 2000), QueuedJob("b", 4, 2000), QueuedJob("c", 4, 600))
    for price in (0.0, 0.1, 1.0):
        instance = round_of(*queue, price=price)
        decision = get_policy("cpsat").decide(instance)
        assert check(instance, decision) == []
        assert decision.status == "optimal", price
        assert decision.bound is not None and decision.bound <= decision.objective + 1e-6
        wspt = get_policy("wspt").decide(instance)
        assert decision.objective <= wspt.objective + 1e-6


def test_prices_round_trip_through_instance_json_and_none_are_written_by_default() -> None:
    priced = round_of(QueuedJob("j", 4, 2000), price=0.5)
    raw = json.loads(json.dumps(instance_to_dict(priced)))
    assert raw["policy"]["gpu_second_prices"] == {"fast": 0.5}
    assert instance_from_dict(raw).policy.gpu_second_price("fast") == 0.5
    plain = instance_to_dict(round_of(QueuedJob("j", 4, 2000)))
    assert "gpu_second_prices" not in plain["policy"]


@pytest.mark.parametrize(
    ("prices", "path", "value"),
    [
        ({"fast": -1}, "policy.gpu_second_prices.fast", -1),
        ({"fast": "cheap"}, "policy.gpu_second_prices.fast", "cheap"),
        ({"tpu": 1.0}, "policy.gpu_second_prices.tpu", "tpu"),
    ],
)
def test_a_bad_price_names_its_field_and_value(
    prices: dict[str, object], path: str, value: object
) -> None:
    raw = instance_to_dict(round_of(QueuedJob("j", 4, 2000)))
    raw["policy"]["gpu_second_prices"] = prices
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "round.json")
    assert (caught.value.source, caught.value.path) == ("round.json", path)
    assert json.dumps(value) in caught.value.message


def test_deferring_a_job_does_not_dodge_the_price() -> None:
    # Priced at 1,000 on every type, the job's GPU-seconds cost far more than deferring
    # it past the horizon would (about 605,000 weighted s): a deferred job still pays
    # the price of its cheapest type, so every solver starts it.
    instance = round_of(QueuedJob("j", 4, 2000), prices={"fast": 1000.0, "slow": 1000.0})
    for name in ("wspt", "cpsat"):
        decision = get_policy(name).decide(instance)
        assert check(instance, decision) == []
        assert decision.job("j").action is Action.START, name
        assert decision.objective == pytest.approx(1000 + 1000.0 * 4 * 1000)
    deferred = objective(instance, ())
    assert deferred == pytest.approx(instance.deferred_cost_end(0) + 1000.0 * 4 * 1000)


def test_a_long_job_runs_on_the_unpriced_type_rather_than_being_deferred() -> None:
    # 8 GPUs for 20 days on the slow type (10 on the fast one, priced 1): 8.6e6 s on the
    # fast type, 1.7e6 s on the slow one. Deferred, it is priced as run past the
    # horizon on the slow type, so deferring never beats starting it there now (priced
    # at the horizon + its fast run and no price, it would: 1.5e6 s).
    instance = round_of(QueuedJob("j", 8, 1_728_000), price=1.0)
    for name in ("wspt", "cpsat"):
        assert type_of(instance, name) == "slow", name
    assert objective(instance, ()) == pytest.approx(604_800 + 1_728_000)


def test_a_deferred_job_is_priced_only_on_types_whose_nodes_could_hold_it() -> None:
    # The slow type's nodes have 2 GPUs: an 8-GPU job that needs one node can never run
    # there, so deferring it is priced on the fast type, price included, and it starts.
    nodes = (Node("f0", "fast", 8, "nvswitch"), Node("s0", "slow", 2, "pcie"))
    instance = round_of(
        QueuedJob("j", 8, 1_728_000, topology="node"), prices={"fast": 1.0}, nodes=nodes
    )
    for name in ("wspt", "cpsat"):
        assert type_of(instance, name) == "fast", name
    on_fast = 864_000 + 8 * 864_000
    assert objective(instance, ()) == pytest.approx(604_800 + on_fast)


def test_bounds_count_the_price_every_decision_pays() -> None:
    # Both types priced: 4 GPUs pay 4,000 weighted s on either (1 x 4 x 1,000 on the
    # fast one, 0.5 x 4 x 2,000 on the slow one). Every bound adds that least price,
    # so the bound meets the optimum (1,000 s on the fast type + 4,000).
    instance = round_of(QueuedJob("j", 4, 2000), prices={"fast": 1.0, "slow": 0.5})
    assert least_usage(instance, 0) == pytest.approx(4000.0)
    assert trivial_bound(instance) == pytest.approx(5000.0)
    assert lower_bound(instance) == pytest.approx(5000.0)
    assert lagrangian_bound(instance, 5000.0, time.perf_counter() + 1) <= 5000.0
    for name in ("wspt", "cpsat"):
        decision = get_policy(name).decide(instance)
        assert check(instance, decision) == []
        assert decision.objective == pytest.approx(5000.0)
        assert decision.bound == pytest.approx(5000.0, rel=1e-3)


LONG_S = 1_728_000  # 20 days on the slow type, 10 on the fast one


@pytest.mark.parametrize(
    ("nodes", "job"),
    [
        # The slow node has 4 CPUs and the job needs 32: only the fast node can run it.
        (
            (Node("f0", "fast", 8, "nvswitch", cpu=64), Node("s0", "slow", 8, "nvswitch", cpu=4)),
            QueuedJob("j", 8, LONG_S, cpu=32),
        ),
        # A 16-GPU gang, and the slow type has 8 GPUs in all.
        (
            (
                Node("f0", "fast", 8, "nvswitch", rack="r0"),
                Node("f1", "fast", 8, "nvswitch", rack="r0"),
                Node("s0", "slow", 8, "nvswitch", rack="r1"),
            ),
            QueuedJob("j", 16, LONG_S, topology="any"),
        ),
    ],
)
def test_deferral_is_priced_only_on_types_that_could_run_the_whole_job(
    nodes: tuple[Node, ...], job: QueuedJob
) -> None:
    instance = round_of(job, prices={"fast": 1.0}, nodes=nodes)
    on_fast = LONG_S // 2 * (1 + job.gpu_count)  # its end + 1 x GPUs x seconds
    assert objective(instance, ()) == pytest.approx(604_800 + on_fast)
    for name in ("wspt", "cpsat"):
        assert type_of(instance, name) == "fast", name


def test_a_zero_price_changes_nothing() -> None:
    # The fast node is too small for the job: pricing the types at 0 must leave its
    # deferral priced as without prices (the horizon + its fastest run on a type held).
    nodes = (Node("f0", "fast", 2, "pcie"), Node("s0", "slow", 8, "nvswitch"))
    queue = (QueuedJob("j", 8, 7200, topology="node"),)
    costs = {
        objective(
            Instance(
                name="z",
                gpu_types=TYPES,
                nodes=nodes,
                queue=queue,
                policy=Policy(gpu_second_prices=p),
            ),
            (),
        )
        for p in ({}, {"slow": 0.0}, {"fast": 0.0})
    }
    assert len(costs) == 1


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_a_split_round_keeps_each_pools_prices(solver: str) -> None:
    # Racks of one type each: a pool without the priced type must not be told its price.
    nodes = tuple(Node(f"f{i}", "fast", 8, "nvswitch", rack="r0") for i in range(2)) + tuple(
        Node(f"s{i}", "slow", 8, "nvswitch", rack="r1") for i in range(2)
    )
    instance = Instance(
        name="split",
        gpu_types=TYPES,
        nodes=nodes,
        queue=tuple(QueuedJob(f"j{i}", 4, 3600) for i in range(6)),
        policy=Policy(gpu_second_prices={"fast": 0.5}),
    )
    decision = solve(instance, solver, split_above_gpus=16, time_limit_s=2.0)
    assert check(instance, decision) == []
    assert decision.objective == pytest.approx(objective(instance, decision.jobs))
    assert Policy(gpu_second_prices={"fast": 0.5}).for_types({"slow"}).gpu_second_prices == ()


@pytest.mark.parametrize("prices", [{"fast": True}, [("fast", 1.0), ("fast", 2.0)]])
def test_a_bool_or_a_type_priced_twice_is_refused(prices: object) -> None:
    with pytest.raises(FieldError) as caught:
        Policy(gpu_second_prices=prices)  # type: ignore[arg-type]
    assert caught.value.path == "gpu_second_prices.fast"
