"""Preemption in the heuristics: who is displaced, for whom, and only when it pays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, Decision, Status
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.policies import OrderedPolicy
from whale_opt.problem_data import (
    DEFAULT_PRIORITY_CLASSES,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)
from whale_opt.registry import REGISTRY, get_policy
from whale_opt.testing import instances

HEURISTICS = sorted(name for name in REGISTRY if name not in ("cpsat", "greedy", "learned"))
TYPES = {"a100": GpuType("a100", 80.0)}


def node(node_id: str, layout: str = "nvswitch", gpus: int = 8, **fields: object) -> Node:
    return Node(node_id, "a100", gpus, layout, **fields)  # type: ignore[arg-type]


def holding(
    job_id: str,
    node_id: str,
    indices: Sequence[int] = range(8),
    *,
    remaining_s: int = 10_000,
    priority_class: str = "best-effort",
    since_checkpoint_s: int = 600,
    **fields: object,
) -> RunningJob:
    """A running job on ``indices`` of ``node_id``; by default best-effort, running for
    a day, 600 s of work since its last checkpoint and 60 s to restore."""
    return RunningJob(
        job_id,
        tuple(f"{node_id}/{i}" for i in indices),
        remaining_s,
        priority_class=priority_class,
        since_checkpoint_s=since_checkpoint_s,
        started_at=fields.pop("started_at", -86_400),  # type: ignore[arg-type]
        checkpoint_s=fields.pop("checkpoint_s", 60),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


def round_of(
    nodes: Sequence[Node],
    queue: Sequence[QueuedJob],
    running: Sequence[RunningJob],
    **fields: object,
) -> Instance:
    policy = Policy(allow_preemption=True, **fields.pop("policy", {}))  # type: ignore[arg-type]
    return Instance(
        name="preempt",
        gpu_types=TYPES,
        nodes=tuple(nodes),
        running=tuple(running),
        queue=tuple(queue),
        policy=policy,
        **fields,  # type: ignore[arg-type]
    )


def decided(instance: Instance, name: str = "wspt") -> Decision:
    decision = get_policy(name).decide(instance)
    assert check(instance, decision) == [], name
    return decision


def preempted(decision: Decision) -> list[str]:
    return sorted(item.id for item in decision.by_action(Action.PREEMPT))


def gpus_of(decision: Decision, job_id: str) -> set[str]:
    item = decision.job(job_id)
    assert item.action is Action.START
    return set(item.gpu_ids)


def ids(node_id: str, indices: Sequence[int]) -> set[str]:
    return {f"{node_id}/{i}" for i in indices}


@pytest.mark.parametrize("name", HEURISTICS)
def test_a_best_effort_job_is_preempted_for_a_training_job(name: str) -> None:
    instance = round_of([node("n0")], [QueuedJob("train", 8, 1000)], [holding("spot", "n0")])
    decision = decided(instance, name)
    assert preempted(decision) == ["spot"]
    assert gpus_of(decision, "train") == ids("n0", range(8))
    # 1000 for the job, 0.1 x (600 lost + 60 restore) for the victim; waiting: 11,000.
    assert decision.objective == pytest.approx(1066)
    waiting = decided(instance.replace(policy=Policy()), name)
    assert preempted(waiting) == [] and waiting.objective == 11_000


def test_the_cheapest_victim_is_chosen_on_a_node() -> None:
    running = [
        holding("stale", "n0", range(4), since_checkpoint_s=6000),  # costs 0.1 x 6060
        holding("fresh", "n0", range(4, 8), since_checkpoint_s=60),  # costs 0.1 x 120
    ]
    decision = decided(round_of([node("n0")], [QueuedJob("train", 4, 1000)], running))
    assert preempted(decision) == ["fresh"]
    assert gpus_of(decision, "train") == ids("n0", range(4, 8))


def test_two_cheap_victims_beat_one_dear_one() -> None:
    running = [
        holding("pair-a", "n0", range(2), since_checkpoint_s=60),  # 12 each
        holding("pair-b", "n0", range(2, 4), since_checkpoint_s=60),
        holding("n0-rest", "n0", range(4, 8), priority_class="online"),
        holding("dear", "n1", range(4), since_checkpoint_s=2000),  # 206
        holding("n1-rest", "n1", range(4, 8), priority_class="online"),
    ]
    instance = round_of([node("n0"), node("n1")], [QueuedJob("train", 4, 1000)], running)
    decision = decided(instance)
    assert preempted(decision) == ["pair-a", "pair-b"]
    assert gpus_of(decision, "train") == ids("n0", range(4))


def test_a_contiguous_nvlink_block_beats_gpus_scattered_over_nodes() -> None:
    # Preempting the two cheap jobs frees 4 GPUs, but 2 + 2 on two nodes: no use to
    # a 4-GPU NVLink job. The dearer job frees a whole block on one node.
    running = [
        holding("cheap-0", "n0", range(2), since_checkpoint_s=0),
        holding("serve-0", "n0", range(2, 8), priority_class="online"),
        holding("cheap-1", "n1", range(2), since_checkpoint_s=0),
        holding("serve-1", "n1", range(2, 8), priority_class="online"),
        holding("dear", "n2", range(4), since_checkpoint_s=3000),
        holding("serve-2", "n2", range(4, 8), priority_class="online"),
    ]
    nodes = [node("n0"), node("n1"), node("n2")]
    decision = decided(round_of(nodes, [QueuedJob("train", 4, 1000, topology="nvlink")], running))
    assert preempted(decision) == ["dear"]
    assert gpus_of(decision, "train") == ids("n2", range(4))


def test_a_victim_that_completes_an_nvlink_pair_beats_a_cheaper_one_that_does_not() -> None:
    # Pairs layout (0-1, 2-3), GPU 3 free: only freeing GPU 2 gives a linked pair.
    running = [
        holding("serve", "p0", [0], priority_class="online"),
        holding("cheap", "p0", [1], since_checkpoint_s=0),
        holding("dear", "p0", [2], since_checkpoint_s=3000),
    ]
    job = QueuedJob("train", 2, 1000, topology="nvlink")
    decision = decided(round_of([node("p0", "pairs", 4)], [job], running))
    assert preempted(decision) == ["dear"]
    assert gpus_of(decision, "train") == ids("p0", [2, 3])


def test_a_multi_node_gang_clears_the_cheapest_whole_nodes_of_one_rack() -> None:
    nodes = [node("n0", rack="r0"), node("n1", rack="r0"), node("n2", rack="r0")]
    running = [
        holding("half", "n1", range(4), since_checkpoint_s=60),
        holding("full", "n2", since_checkpoint_s=5000),
    ]
    decision = decided(round_of(nodes, [QueuedJob("gang", 16, 1000, topology="nvlink")], running))
    assert preempted(decision) == ["half"]
    assert gpus_of(decision, "gang") == ids("n0", range(8)) | ids("n1", range(8))


@pytest.mark.parametrize(("started_at", "expected"), [(-100, []), (-3600, ["spot"])])
def test_min_run_s_protects_a_job_that_just_started(started_at: int, expected: list[str]) -> None:
    running = [holding("spot", "n0", started_at=started_at, since_checkpoint_s=0)]
    instance = round_of(
        [node("n0")], [QueuedJob("train", 8, 1000)], running, policy={"min_run_s": 600}
    )
    assert preempted(decided(instance)) == expected


@pytest.mark.parametrize(("cap", "count"), [(None, 2), (1, 1), (0, 0)])
def test_max_preemptions_caps_the_round(cap: int | None, count: int) -> None:
    instance = round_of(
        [node("n0"), node("n1")],
        [QueuedJob("t0", 8, 1000), QueuedJob("t1", 8, 1000)],
        [holding("s0", "n0"), holding("s1", "n1")],
        policy={"max_preemptions": cap},
    )
    for name in HEURISTICS:
        assert len(preempted(decided(instance, name))) == count, name


def test_online_work_is_never_preempted() -> None:
    urgent = PriorityClass("urgent", weight=100.0, rank=9, preemptible=False)
    queue = [
        QueuedJob("page", 8, 100, priority_class="urgent"),
        QueuedJob("serve", 8, 100, priority_class="online", weight=50.0),
    ]
    running = [holding("api", "n0", priority_class="online", since_checkpoint_s=0)]
    classes = {**DEFAULT_PRIORITY_CLASSES, "urgent": urgent}
    instance = round_of([node("n0")], queue, running, priority_classes=classes)
    for name in HEURISTICS:
        assert preempted(decided(instance, name)) == [], name


def test_a_job_flagged_not_preemptible_stays_whatever_its_class() -> None:
    running = [holding("pinned", "n0", preemptible=False)]
    instance = round_of([node("n0")], [QueuedJob("train", 8, 1000)], running)
    assert preempted(decided(instance)) == []


@pytest.mark.parametrize(
    ("lender_guarantee", "expected"), [(None, ["borrowed"]), (0, ["borrowed"]), (8, [])]
)
def test_a_tenant_below_its_guarantee_reclaims_borrowed_gpus(
    lender_guarantee: int | None, expected: list[str]
) -> None:
    # Both training: rank gives no right to preempt. Tenant a holds 0 of its 8
    # guaranteed GPUs; b's 8 are borrowed unless b is guaranteed them itself.
    running = [holding("borrowed", "n0", priority_class="training", tenant="b")]
    instance = round_of(
        [node("n0")],
        [QueuedJob("mine", 8, 1000, tenant="a")],
        running,
        tenants={"a": Tenant("a", guaranteed_gpus=8), "b": Tenant("b", None, lender_guarantee)},
    )
    decision = decided(instance)
    assert preempted(decision) == expected
    assert decision.job("mine").action is (Action.START if expected else Action.PLANNED)


def test_a_tenant_at_its_guarantee_reclaims_nothing() -> None:
    running = [
        holding("own", "n0", priority_class="online", tenant="a"),
        holding("borrowed", "n1", priority_class="training", tenant="b"),
    ]
    instance = round_of(
        [node("n0"), node("n1")],
        [QueuedJob("more", 8, 1000, tenant="a")],
        running,
        tenants={"a": Tenant("a", guaranteed_gpus=8)},
    )
    assert preempted(decided(instance)) == []


@pytest.mark.parametrize(("weight", "expected"), [(1.0, []), (20.0, ["spot"])])
def test_preemption_happens_only_when_it_pays(weight: float, expected: list[str]) -> None:
    # The victim ends in 200 s; preempting it loses 0.1 x (20,000 + 60) = 2006.
    # Starting now gains weight x 200: 200 does not pay, 4000 does.
    running = [holding("spot", "n0", remaining_s=200, since_checkpoint_s=20_000)]
    instance = round_of([node("n0")], [QueuedJob("train", 8, 1000, weight=weight)], running)
    decision = decided(instance)
    assert preempted(decision) == expected
    assert decision.objective == pytest.approx(
        weight * 1200 if not expected else weight * 1000 + 2006
    )


def test_quota_is_respected_when_preempting() -> None:
    # Tenant t is at its quota through a running job: freeing another node does not help.
    running = [
        holding("own", "n0", priority_class="online", tenant="t"),
        holding("spot", "n1", tenant="u"),
    ]
    instance = round_of(
        [node("n0"), node("n1")],
        [QueuedJob("train", 8, 1000, tenant="t")],
        running,
        tenants={"t": Tenant("t", 8)},
    )
    assert preempted(decided(instance)) == []


def test_a_draining_node_is_not_cleared_for_new_work() -> None:
    nodes = [node("n0", draining=True), node("n1")]
    running = [holding("spot-0", "n0", since_checkpoint_s=0), holding("spot-1", "n1")]
    decision = decided(round_of(nodes, [QueuedJob("train", 8, 1000)], running))
    assert preempted(decision) == ["spot-1"]
    assert gpus_of(decision, "train") == ids("n1", range(8))


@st.composite
def preemptive_rounds(draw: st.DrawFn) -> Instance:
    """Generated rounds with preemption on, running jobs of mixed classes (mostly
    preemptible, some checkpointed), guarantees and the round's caps."""
    instance = draw(instances(max_nodes=4, max_queue=5, max_running=5))
    classes = sorted(instance.priority_classes)
    running = tuple(
        replace(
            job,
            priority_class=draw(st.sampled_from(["best-effort", "training", *classes])),
            since_checkpoint_s=draw(st.one_of(st.none(), st.integers(0, -job.started_at))),
            preemptible=draw(st.sampled_from([True, True, False])),
        )
        for job in instance.running
    )
    queue = tuple(
        replace(job, priority_class=draw(st.sampled_from(["training", "online", *classes])))
        for job in instance.queue
    )
    tenants = {}
    for name in {job.tenant for job in (*running, *queue)}:
        quota = instance.tenants[name].gpu_quota if name in instance.tenants else None
        guarantee = draw(st.sampled_from([None, 0, 2, 8, 16]))
        if guarantee is not None and quota is not None:
            guarantee = min(guarantee, quota)
        tenants[name] = Tenant(name, quota, guarantee)
    policy = replace(
        instance.policy,
        allow_preemption=True,
        max_preemptions=draw(st.sampled_from([None, None, 1, 2])),
        min_run_s=draw(st.sampled_from([0, 0, 3600])),
    )
    return instance.replace(running=running, queue=queue, tenants=tenants, policy=policy)


@settings(max_examples=30, deadline=None)
@given(preemptive_rounds())
def test_every_heuristic_decision_with_preemption_passes_the_checker(instance: Instance) -> None:
    for name in HEURISTICS:
        policy = get_policy(name)
        assert isinstance(policy, OrderedPolicy)
        decision = policy.decide(instance)
        assert check(instance, decision) == [], name
        # Never worse than the policy's own list schedule without preemption.
        plain = list_schedule(instance, policy.order(instance), prefer=policy.prefer)
        baseline = assemble(instance, name, plain, Status.FEASIBLE, 0.0, 0.0).objective
        assert decision.objective <= baseline * (1 + 1e-9) + 1e-6, name


def test_a_job_only_draining_nodes_could_hold_is_deferred_saying_so() -> None:
    nodes = [node("n0", draining=True), node("small", gpus=4)]
    instance = round_of(nodes, [QueuedJob("train", 8, 1000, topology="node")], [])
    item = decided(instance).job("train")
    assert item.action is Action.DEFERRED
    assert item.reason == "every node that could hold it is draining: n0"
