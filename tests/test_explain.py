"""Explain: each reason built on purpose, each verified counterfactual applied again."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.decision import Action
from whale_opt.explain import Explanation, apply_change, explain
from whale_opt.io import read_instance
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob, RunningJob, Tenant
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
