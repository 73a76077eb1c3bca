"""Explain: each reason built on purpose, each verified counterfactual applied again."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.decision import Action
from whale_opt.explain import Explanation, apply_change, explain
from whale_opt.io import read_instance
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob, Tenant
from whale_opt.solve import solve

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
TYPES = {"A": GpuType("A", 80, 1.0), "B": GpuType("B", 40, 2.0)}


def _cluster(*nodes: Node, running=(), queue=(), tenants=None) -> Instance:  # type: ignore[no-untyped-def]
    return Instance(
        name="tiny",
        gpu_types=TYPES,
        nodes=nodes,
        running=tuple(running),
        queue=tuple(queue),
        tenants=tenants or {},
    )


def _node(node_id: str, gpu_type: str = "A", **kw: object) -> Node:
    return Node(node_id, gpu_type, 8, "nvswitch", rack="r0", **kw)  # type: ignore[arg-type]


def _node2(node_id: str) -> Node:
    return Node(node_id, "A", 2, rack="r0")


def _held(node_id: str, count: int, start: int = 0) -> tuple[str, ...]:
    return tuple(f"{node_id}/{i}" for i in range(start, start + count))


def _one(instance: Instance, job_id: str) -> Explanation:
    (found,) = explain(instance, [job_id])
    _assert_verified(instance, found)
    return found


def _assert_verified(instance: Instance, found: Explanation) -> None:
    for cf in found.counterfactuals:
        action = solve(apply_change(instance, cf.instance_change)).job(found.job_id).action
        assert (action is Action.START) == cf.verified, cf.change


def _kinds(found: Explanation) -> list[str]:
    return [r.kind for r in found.reasons]


def _reason(found: Explanation, kind: str):  # type: ignore[no-untyped-def]
    return next(r for r in found.reasons if r.kind == kind)


def test_no_gpu_type_in_the_cluster() -> None:
    inst = _cluster(_node("a0"), queue=[QueuedJob("j", 1, 100, gpu_types=("B",))])
    found = _one(inst, "j")
    assert _kinds(found) == ["no-hardware"]
    assert _reason(found, "no-hardware").facts["fails"] == ["type"]
    assert "B" in found.reasons[0].message
    accept = [cf for cf in found.counterfactuals if cf.instance_change.kind == "gpu-types"]
    assert accept and accept[0].verified


def test_not_enough_gpu_memory() -> None:
    inst = _cluster(_node("a0"), queue=[QueuedJob("j", 1, 100, min_gpu_memory_gb=100)])
    found = _one(inst, "j")
    assert _reason(found, "no-hardware").facts["fails"] == ["memory"]
    assert "100 GB" in found.reasons[0].message


def test_nvlink_size_too_large() -> None:
    inst = _cluster(_node("a0"), queue=[QueuedJob("j", 12, 100, gpu_types=("A",))])
    found = _one(inst, "j")
    reason = _reason(found, "no-hardware")
    assert reason.facts["fails"] == ["topology"] and reason.facts["largest_nvlink_block"] == 8


def test_a_gang_no_node_set_can_hold_is_told_why_not_that_no_node_could_take_part() -> None:
    # Two 8-GPU nodes of one rack, one with a failed GPU: a 16-GPU NVLink gang needs
    # both whole. It said "the nodes that could take part are none", where a whole
    # healthy node exists.
    inst = _cluster(
        _node("a0"),
        _node("a1", failed_gpus=(7,)),
        queue=[QueuedJob("j", 16, 100, gpu_types=("A",))],
    )
    message = _reason(_one(inst, "j"), "no-hardware").message
    assert "cannot hold 16 NVLink-connected GPUs on whole NVLink-connected nodes" in message
    assert "none" not in message


def test_busy_names_the_running_job_and_its_end() -> None:
    inst = _cluster(
        _node("a0"),
        running=[RunningJob("r", _held("a0", 6), 500)],
        queue=[QueuedJob("j", 4, 100)],
    )
    found = _one(inst, "j")
    busy = _reason(found, "busy")
    assert busy.facts["until_s"] == 500
    assert busy.facts["holders"][0] == {"job": "r", "nodes": ["a0"], "gpus": 6, "ends_s": 500}
    assert "r (a0, ends 500 s)" in busy.message
    changes = {cf.instance_change.kind for cf in found.counterfactuals if cf.verified}
    assert {"preempt", "wait"} <= changes


def test_scattered_names_the_nodes_and_free_counts() -> None:
    inst = _cluster(
        _node("a0"),
        _node("a1"),
        running=[
            RunningJob("r0", _held("a0", 4), 1000),
            RunningJob("r1", _held("a1", 4), 2000),
        ],
        queue=[QueuedJob("j", 8, 100, topology="node")],
    )
    found = _one(inst, "j")
    assert _kinds(found)[:2] == ["busy", "scattered"]
    assert _reason(found, "scattered").facts["free"] == {"a0": 4, "a1": 4}
    relax = [cf for cf in found.counterfactuals if cf.instance_change.kind == "topology"]
    assert relax[0].verified and relax[0].instance_change.value == "rack"


def test_quota_names_the_number() -> None:
    inst = _cluster(
        _node("a0"),
        _node("a1"),
        running=[RunningJob("r", _held("a0", 8), 900, tenant="t")],
        queue=[QueuedJob("j", 4, 100, tenant="t")],
        tenants={"t": Tenant("t", 8)},
    )
    found = _one(inst, "j")
    assert _kinds(found)[0] == "quota"
    facts = _reason(found, "quota").facts
    assert facts["quota"] == 8 and facts["in_use"] == 8 and facts["needed_quota"] == 12
    raise_ = [cf for cf in found.counterfactuals if cf.instance_change.kind == "quota"]
    assert raise_[0].verified and raise_[0].instance_change.value == 12


def test_a_quota_smaller_than_the_job_is_the_quota_not_the_hardware() -> None:
    inst = _cluster(
        _node("a0"), queue=[QueuedJob("j", 4, 100, tenant="t")], tenants={"t": Tenant("t", 2)}
    )
    found = _one(inst, "j")
    assert _kinds(found) == ["quota"]  # it was told no hardware meets the request
    assert _reason(found, "quota").facts["needed_quota"] == 4
    raise_ = [cf for cf in found.counterfactuals if cf.instance_change.kind == "quota"]
    assert raise_[0].verified and raise_[0].instance_change.value == 4


def test_no_duration_on_the_cluster_types_is_a_type_failure() -> None:
    # It runs on A too, but its only duration is for B, which the cluster lacks.
    inst = _cluster(_node("a0"), queue=[QueuedJob("j", 1, None, duration_by_type_s=(("B", 100),))])
    (found,) = explain(inst, ["j"], with_counterfactuals=False)
    facts = _reason(found, "no-hardware").facts
    assert facts["fails"] == ["type"] and facts["types_with_duration"] == ["B"]
    assert "no healthy node has GPU type B" in found.reasons[0].message
    assert "no duration on A" in found.reasons[0].message


def test_memory_is_told_when_only_an_absent_type_has_enough() -> None:
    # B would do (if it had 80 GB) but no node has it; A, here, has too little memory.
    types = {"A": GpuType("A", 40), "B": GpuType("B", 80)}
    inst = Instance(
        name="tiny",
        gpu_types=types,
        nodes=(_node("a0"),),
        queue=(QueuedJob("j", 1, 100, min_gpu_memory_gb=60),),
    )
    (found,) = explain(inst, ["j"], with_counterfactuals=False)
    facts = _reason(found, "no-hardware").facts
    assert facts["fails"] == ["memory"]
    assert "the largest allowed type in the cluster has 40 GB" in found.reasons[0].message


def test_quota_that_binds_later_names_the_use_then() -> None:
    # t uses nothing now, but "big" is planned on a0 at 500 s with all 8 GPUs of t's
    # quota; j could start on a1 now, but its run would overlap big's: it waits.
    inst = _cluster(
        _node("a0"),
        Node("a1", "A", 4, "nvswitch", rack="r0"),
        running=[RunningJob("r", _held("a0", 8), 500, tenant="u")],
        queue=[
            QueuedJob("big", 8, 1000, tenant="t", weight=10),
            QueuedJob("j", 4, 1000, tenant="t"),
        ],
        tenants={"t": Tenant("t", 8)},
    )
    decision = solve(inst)
    assert decision.job("big").start_s == 500 and decision.job("j").start_s == 1500
    found = _one(inst, "j")
    quota = _reason(found, "quota")
    # It said "quota reached: 0 of 8 GPUs in use now".
    assert quota.facts["in_use"] == 0 and "in use now" not in quota.message
    assert quota.facts["could_start_s"] == 0
    assert quota.facts["peak_in_use"] == 8 and quota.facts["peak_at_s"] == 500
    assert "8 of 8 GPUs in use at 500 s" in quota.message
    # The quota that lets it in is the one of that moment: 12, not the 4 it needs now.
    raised = [cf for cf in found.counterfactuals if cf.instance_change.kind == "quota"]
    assert [(cf.instance_change.value, cf.verified) for cf in raised] == [(12, True)]


def test_deferred_though_it_could_start_is_priced_as_ending_sooner() -> None:
    # On A, j takes 5,000 s; deferred, it is priced at the horizon plus its 50 s on
    # B, whose one node is down: 1,050 s. CP-SAT defers it; explain said nothing.
    inst = _cluster(
        _node("a0"),
        _node("b0", "B", down=True),
        queue=[QueuedJob("j", 1, 100, duration_by_type_s=(("A", 5000), ("B", 50)))],
    ).replace(policy=Policy(horizon_s=1000))
    (found,) = explain(inst, ["j"], solver="cpsat", with_counterfactuals=False)
    assert found.action is Action.DEFERRED
    later = _reason(found, "faster-later")
    assert later.facts["deferred"] is True
    assert later.facts["planned_end_s"] == 1050 and later.facts["could_end_s"] == 5000


def test_outranked_by_a_job_planned_at_the_same_start() -> None:
    # r frees a0/0 and a1/0 at 70 s. "pair" (heavier) is planned then on a0, whole; j
    # could start now on a0/1 + a1/1 but would hold a0/1 into pair's run, so it goes
    # at 70 s on a1: it was told no reason at all.
    inst = _cluster(
        _node2("a0"),
        _node2("a1"),
        running=[RunningJob("r", ("a0/0", "a1/0"), 70)],
        queue=[
            QueuedJob("pair", 2, 100, weight=10, topology="node"),
            QueuedJob("j", 2, 100, topology="any"),
        ],
    )
    decision = solve(inst)
    assert decision.job("pair").start_s == decision.job("j").start_s == 70
    found = _one(inst, "j")
    assert _reason(found, "outranked").facts["by"][0]["job"] == "pair"


def test_outranked_names_the_heavier_job() -> None:
    inst = _cluster(
        _node("a0"),
        queue=[QueuedJob("lo", 8, 100, weight=1), QueuedJob("hi", 8, 100, weight=10)],
    )
    found = _one(inst, "lo")
    outranked = _reason(found, "outranked")
    assert outranked.facts["by"][0]["job"] == "hi" and outranked.facts["by"][0]["weight"] == 10
    assert "hi" in outranked.message


def test_faster_type_later() -> None:
    inst = _cluster(
        _node("a0"),
        _node("b0", "B"),
        running=[RunningJob("r", _held("b0", 8), 100)],
        queue=[QueuedJob("j", 8, 10_000, topology="node")],
    )
    found = _one(inst, "j")
    assert _kinds(found) == ["faster-later"]
    assert _reason(found, "faster-later").facts["nodes"] == ["a0"]


def test_a_priced_type_free_now_is_told_as_the_price() -> None:
    # b0 (type B, twice as fast) is free now but priced at 1 a GPU-second: 5,000 s there
    # cost 5,000 + 8 x 5,000; waiting 100 s for a0 ends at 10,100 with no price.
    inst = Instance(
        name="tiny",
        gpu_types=TYPES,
        nodes=(_node("a0"), _node("b0", "B")),
        running=(RunningJob("r", _held("a0", 8), 100),),
        queue=(QueuedJob("j", 8, 10_000, topology="node"),),
        policy=Policy(gpu_second_prices={"B": 1.0}),
    )
    found = _one(inst, "j")
    assert _kinds(found) == ["price"]
    facts = _reason(found, "price").facts
    assert facts["nodes"] == ["b0"] and facts["gpu_type"] == "B"
    assert (facts["price_now"], facts["price_planned"]) == (40_000, 0)
    assert (facts["cost_now"], facts["cost_planned"]) == (45_000, 10_100)
    assert "policy.gpu_second_prices" in _reason(found, "price").message


def test_zone_preference_paid() -> None:
    inst = _cluster(
        _node("a0", zone="east"),
        _node("a1", zone="west"),
        running=[RunningJob("r", _held("a0", 8), 5000)],
        queue=[QueuedJob("j", 8, 100, zone="east")],
    )
    (found,) = explain(inst, ["j"])
    assert found.action is Action.START
    paid = _reason(found, "preference")
    assert paid.facts["nodes"] == ["a1"] and paid.facts["penalty"] == 3600


def test_nothing_pending_means_nothing_to_explain() -> None:
    inst = _cluster(_node("a0"), queue=[QueuedJob("j", 2, 100)])
    assert explain(inst) == []


def test_unknown_job_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        explain(_cluster(_node("a0")), ["nope"])


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*/*.json")), ids=lambda p: p.stem)
def test_every_example_instance_is_explained(path: Path) -> None:
    instance = read_instance(path)
    gpus = sum(n.gpu_count for n in instance.nodes)
    pending = [
        item.id for item in solve(instance).jobs if item.action in (Action.PLANNED, Action.DEFERRED)
    ]
    asked = None if gpus <= 512 else pending[:3]  # the 1,024-GPU one: a sample, for speed
    found = explain(instance, asked, with_counterfactuals=gpus <= 40)
    assert [e.job_id for e in found] == (pending if asked is None else asked)
    assert all(e.reasons for e in found)  # every pending job has a reason
    for e in found[:2]:
        _assert_verified(instance, e)
        assert e.to_dict()["id"] == e.job_id and e.render().startswith(e.job_id)
