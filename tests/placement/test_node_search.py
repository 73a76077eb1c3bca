"""The node search: its per-node accounting is what the placement search then
places, so the decision it returns costs exactly what the search says, passes
the checker, and is never worse than where it started."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, JobDecision, Status, job_nodes, objective
from whale_opt.generate import generate
from whale_opt.placement import node_search
from whale_opt.placement.node_search import NodeSearch, improve_nodes
from whale_opt.placement.serial import assemble
from whale_opt.policies.wspt import WsptPolicy
from whale_opt.problem_data import (
    GpuType,
    Instance,
    Node,
    QueuedJob,
    RunningJob,
    tenant_quota,
)
from whale_opt.registry import get_policy
from whale_opt.testing import instances

A100 = "A100-80G"


def _searched(instance: Instance, moves: int, seed: int = 0) -> tuple[float, float, NodeSearch]:
    """The greedy's objective, how much ``moves`` moves gained on it, and the search."""
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    gained = search.improve(math.inf, seed=seed, moves=moves)
    return greedy.objective, gained, search


def _decided_and_checked(instance: Instance, search: NodeSearch) -> float:
    found = search.decision()
    assert found is not None
    jobs, value = found
    decision = assemble(instance, "node-search", jobs, Status.FEASIBLE, 0.0, 0.0)
    assert check(instance, decision) == []
    assert value == pytest.approx(objective(instance, jobs))
    return value


@pytest.mark.parametrize(
    ("family", "seed"), [("hetero", 1), ("fragmented", 2), ("dgx1", 3), ("mixed", 4)]
)
def test_the_decision_costs_what_the_search_says_and_is_checked(family: str, seed: int) -> None:
    instance = generate(family, gpus=256, queued=80, seed=seed)
    start, gained, search = _searched(instance, moves=1500)
    assert search.moved > 0  # these rounds have moves that pay
    assert gained > 0
    value = _decided_and_checked(instance, search)
    assert value == pytest.approx(start - gained, rel=1e-9)


def _walk(search: NodeSearch, steps: int, seed: int) -> float:
    """``steps`` random relocations, better or worse; the objective's change."""
    rng = random.Random(seed)
    jobs = sorted(search.node_of)
    change = 0.0
    for _ in range(steps if jobs else 0):
        k = rng.choice(jobs)
        node = rng.choice(search.choices[k])
        delta = search.relocate(k, node, rng.randrange(len(search.sequence[node]) + 1))
        change += 0.0 if delta is None else delta
    return change


@settings(max_examples=60, deadline=None)
@given(instances(), st.integers(0, 3))
def test_on_any_instance_the_node_model_is_the_placement_rules(
    instance: Instance, seed: int
) -> None:
    # Exactness: the per-node sequences re-timed by counts (GPU, CPU, memory, the
    # GPUs free now) give the very starts the placement search finds, whatever
    # the cluster (shares, quotas, failed GPUs, partial NVLink, preemptions),
    # after any moves, not only improving ones.
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    change = _walk(search, 30, seed)
    value = _decided_and_checked(instance, search)
    assert value == pytest.approx(greedy.objective + change, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize(
    ("family", "seed"), [("hetero", 7), ("fragmented", 8), ("dgx1", 9), ("mixed", 10)]
)
def test_after_random_moves_the_decision_costs_what_the_search_says(family: str, seed: int) -> None:
    instance = generate(family, gpus=256, queued=60, seed=seed)
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    change = _walk(search, 300, seed)
    assert change != 0.0
    value = _decided_and_checked(instance, search)
    assert value == pytest.approx(greedy.objective + change, rel=1e-9)


def test_only_one_node_jobs_free_of_quotas_move() -> None:
    instance = generate("hetero", gpus=256, queued=80, seed=5)
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs))
    kinds = {"quota": 0, "several nodes": 0}
    for item in greedy.jobs:
        k = instance.queue_index.get(item.id)
        if k is None or item.action not in (Action.START, Action.PLANNED):
            continue
        if tenant_quota(instance, instance.queue[k].tenant) is not None:
            kinds["quota"] += 1
            assert k not in search.node_of
        if len(job_nodes(item)) > 1:
            kinds["several nodes"] += 1
            assert k not in search.node_of
    assert all(kinds.values())  # the round has both kinds, and neither moved
    assert search.node_of  # and others that may


def test_improve_nodes_returns_the_start_when_nothing_pays() -> None:
    instance = generate("fragmented", gpus=128, queued=40, seed=6)
    greedy = get_policy("wspt").decide(instance)
    jobs, value, search = improve_nodes(
        instance, list(greedy.jobs), greedy.objective, math.inf, moves=0
    )
    assert search.tried == 0
    assert value == greedy.objective
    assert jobs == list(greedy.jobs)
    jobs, value, search = improve_nodes(
        instance, list(greedy.jobs), greedy.objective, math.inf, moves=800
    )
    assert value <= greedy.objective
    assert value == pytest.approx(objective(instance, jobs))


def test_a_job_waits_for_host_memory_on_the_node_it_moves_to() -> None:
    def node(node_id: str) -> Node:
        return Node(node_id, A100, 8, "nvswitch", cpu=64, memory_gb=100)

    instance = Instance(
        name="memory",
        gpu_types={A100: GpuType(A100, 80)},
        nodes=(node("n0"), node("n1")),
        queue=(
            QueuedJob("q0", 1, 1000, memory_gb=80, weight=2.0),
            QueuedJob("q1", 1, 500, memory_gb=80),
        ),
    )
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    assert sorted(search.node_of.values()) == [0, 1]  # memory keeps them apart
    q1 = instance.queue_index["q1"]
    n0 = instance.node_index["n0"]
    # On n0 beside q0 (7 GPUs free, 20 GB of memory) q1 starts once q0 ends.
    change = search.relocate(q1, n0, 1)
    assert change == pytest.approx(1000.0)
    jobs, value = search.decision() or ([], 0.0)
    assert value == pytest.approx(greedy.objective + 1000.0)
    assert next(item for item in jobs if item.id == "q1").start_s == 1000


def test_jobs_that_want_nvlink_move_only_between_fully_linked_nodes() -> None:
    v100 = "V100-32G"

    def node(node_id: str, nvlink: str) -> Node:
        return Node(node_id, v100, 8, nvlink, cpu=64, memory_gb=512)

    def search(running: tuple[RunningJob, ...]) -> tuple[Instance, NodeSearch]:
        instance = Instance(
            name="links",
            gpu_types={v100: GpuType(v100, 32)},
            nodes=(node("mesh", "hybrid-cube-mesh"), node("switch", "nvswitch")),
            running=running,
            queue=(
                QueuedJob("pair", 2, 1000),  # needs its two GPUs linked
                QueuedJob("pair-soft", 2, 1000, topology="any", prefer_nvlink=True),
                QueuedJob("single", 1, 1000),
            ),
        )
        greedy = get_policy("wspt").decide(instance)
        return instance, NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)

    # All on the mesh: the pairs are held there, the single job may go anywhere.
    instance, found = search(())
    index = instance.queue_index
    assert index["pair"] not in found.node_of
    assert index["pair-soft"] not in found.node_of
    assert sorted(found.choices[index["single"]]) == [0, 1]
    # With the mesh busy, the pairs go to the switch node and may not leave it.
    busy = RunningJob("r", tuple(f"mesh/{i}" for i in range(7)), 5000)
    instance, found = search((busy,))
    for job_id in ("pair", "pair-soft"):
        k = instance.queue_index[job_id]
        assert found.node_of[k] == 1
        assert found.choices[k] == [1]


def test_a_search_with_nothing_left_to_gain_stops_once_stalled() -> None:
    # An idle cluster: every job starts now on a node of its fastest type, so no
    # move pays, and the search, given no deadline, stops on its own.
    instance = generate("hetero", gpus=256, queued=6, load=0.0, seed=11)
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    assert search.node_of
    assert search.improve(math.inf) == 0.0
    assert search.stalled
    assert search.tried == node_search.STALL_PER_JOB * len(search.node_of)


def test_a_node_whose_jobs_cannot_all_be_timed_again_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Timed again in order, a node's jobs could in principle end past the horizon
    # (an earlier start pushing a later one): such a node's jobs stay put.
    instance = generate("fragmented", gpus=128, queued=40, seed=12)
    greedy = get_policy("wspt").decide(instance)
    first = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    busy = max(range(len(first.sequence)), key=lambda n: len(first.sequence[n]))
    jobs_there = list(first.sequence[busy])
    cost = NodeSearch.node_cost

    def past_horizon(self: NodeSearch, node: int, *args: Any) -> float:
        building = not hasattr(self, "tried")  # set once the search is built
        return math.inf if building and node == busy else cost(self, node, *args)

    monkeypatch.setattr(NodeSearch, "node_cost", past_horizon)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    start = objective(instance, list(greedy.jobs))
    assert jobs_there and search.sequence[busy] == [] and search.cost[busy] == 0.0
    assert all(k in search.held and k not in search.node_of for k in jobs_there)
    gained = search.improve(math.inf, moves=300)
    assert _decided_and_checked(instance, search) == pytest.approx(start - gained, rel=1e-9)


def test_a_node_where_a_held_job_waits_for_a_release_keeps_its_jobs() -> None:
    # On the mesh node a planned NVLink pair starts when the one job there ends (the
    # release rule). That job would run faster on the A100 node; moving it there
    # would leave the pair planned before anything on the mesh ends.
    v100 = "V100-32G"
    instance = Instance(
        name="release",
        gpu_types={v100: GpuType(v100, 32, 0.5), A100: GpuType(A100, 80, 1.0)},
        nodes=(Node("mesh", v100, 8, "hybrid-cube-mesh"), Node("switch", A100, 8, "nvswitch")),
        running=(RunningJob("r", tuple(f"mesh/{i}" for i in range(6)), 10_000),),
        queue=(QueuedJob("single", 1, 500), QueuedJob("pair", 2, 1000, gpu_types=(v100,))),
    )
    single = instance.durations[instance.queue_index["single"]][v100]
    pair = instance.durations[instance.queue_index["pair"]][v100]
    jobs = [
        JobDecision("single", Action.START, ("mesh/6",), 0, single),
        JobDecision("pair", Action.PLANNED, (), single, single + pair, ("mesh",), (2,)),
        JobDecision("r", Action.KEEP),
    ]
    given = assemble(instance, "by-hand", jobs, Status.FEASIBLE, 0.0, 0.0)
    assert check(instance, given) == []
    search = NodeSearch(instance, jobs, WsptPolicy.prefer)
    k = instance.queue_index["single"]
    assert search.relocate(k, instance.node_index["switch"], 0) is None  # not made
    found, value, _ = improve_nodes(instance, jobs, objective(instance, jobs), math.inf, moves=50)
    decision = assemble(instance, "node-search", found, Status.FEASIBLE, 0.0, 0.0)
    assert check(instance, decision) == []
    assert value == pytest.approx(objective(instance, found))
    assert decision.job("single").gpu_ids[0].startswith("mesh/")


@pytest.mark.parametrize(("gpus", "queued", "seed"), [(128, 48, 5), (256, 80, 7)])
def test_random_moves_on_dgx1_nodes_keep_the_release_rule(
    gpus: int, queued: int, seed: int
) -> None:
    # Cube-mesh nodes, where planned NVLink jobs wait for a job there to end: before
    # the search held such nodes' jobs, these walks left a plan before any end.
    instance = generate("dgx1", gpus=gpus, queued=queued, seed=seed)
    greedy = get_policy("wspt").decide(instance)
    search = NodeSearch(instance, list(greedy.jobs), WsptPolicy.prefer)
    change = _walk(search, 200, seed)
    value = _decided_and_checked(instance, search)
    assert value == pytest.approx(greedy.objective + change, rel=1e-9, abs=1e-6)
