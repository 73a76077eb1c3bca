"""ClusterState: who holds which GPUs now, and how much of each node over time."""

from __future__ import annotations

import math
from typing import Any

import pytest

from whale_opt.placement.profile import Profile
from whale_opt.placement.records import Placement
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob, RunningJob, Tenant

A100 = "A100-80G"
ALL = 0b1111_1111


def held(job_id: str, gpus: str, remaining_s: int, **fields: Any) -> RunningJob:
    """A running job on the comma-separated GPU ids ``gpus``."""
    return RunningJob(job_id, tuple(gpus.split(",")), remaining_s, **fields)


@pytest.fixture
def instance() -> Instance:
    """n0 healthy, n1 with GPU 3 failed, n2 down; r1 across n0 and n1, r2 on n0."""

    def node(node_id: str, **fields: Any) -> Node:
        return Node(node_id, A100, 8, "nvswitch", cpu=64, memory_gb=512, **fields)

    return Instance(
        name="state",
        gpu_types={A100: GpuType(A100, 80)},
        nodes=(node("n0"), node("n1", failed_gpus=(3,)), node("n2", down=True)),
        running=(
            held("r1", "n0/0,n0/1,n1/0", 100, tenant="t", cpu=30, memory_gb=60),
            held("r2", "n0/2", 300, tenant="u"),
        ),
        queue=(
            QueuedJob("q0", 2, 50, tenant="t", topology="any", cpu=8),
            QueuedJob("q1", 4, 200, tenant="u"),
            QueuedJob("q2", 8, 1000),
            QueuedJob("q3", 2, 50, topology="any", cpu=50),
        ),
        tenants={"t": Tenant("t", gpu_quota=4)},
    )


def levels(profile: Profile, times: tuple[int, ...]) -> list[float]:
    """``profile``'s level at each of ``times``."""
    return [profile.level_at(t) for t in times]


def test_running_jobs_hold_their_gpu_ids_now(instance: Instance) -> None:
    state = ClusterState(instance)
    assert state.free_mask(0) == ALL & ~0b111
    assert state.free_count(0) == 5
    assert state.free_mask(1) == ALL & ~0b1 & ~0b1000  # r1's GPU 0 and the failed GPU 3
    assert state.free_count(1) == 6
    assert state.total_free() == 11


def test_running_jobs_hold_their_counts_until_they_end(instance: Instance) -> None:
    state = ClusterState(instance)
    assert levels(state.gpu_profile(0), (0, 99, 100, 299, 300)) == [3, 3, 1, 1, 0]
    assert levels(state.gpu_profile(1), (0, 99, 100)) == [1, 1, 0]
    # r1's CPU and memory split by its GPUs per node: 2 of 3 on n0, 1 of 3 on n1.
    assert levels(state.cpu_profile(0), (0, 100)) == [20, 0]
    assert levels(state.cpu_profile(1), (0, 100)) == [10, 0]
    assert levels(state.mem_profile(0), (0, 100)) == [40, 0]
    assert state.first_end_at(0) == 100
    assert state.first_end_at(1) == 100
    assert state.first_end_at(2) == math.inf


def test_failed_gpus_and_down_nodes_are_never_free(instance: Instance) -> None:
    state = ClusterState(instance, preempted=frozenset({"r1", "r2"}))
    assert state.healthy_count(0) == 8
    assert state.healthy_count(1) == 7
    assert state.healthy_count(2) == 0
    assert state.free_mask(1) == ALL & ~0b1000
    assert state.free_mask(2) == 0
    assert state.total_free() == 15
    assert state.eligible(0) == (0, 1)  # the down node never
    assert state.eligible(2) == (0,)  # 8 linked GPUs: not on a node with one failed
    placement = state.best_placement(0)
    assert placement is not None and placement.start == 0
    for node, mask in zip(placement.nodes, placement.masks, strict=True):
        assert mask & ~state.free_mask(node) == 0
        assert node != 2 and not (node == 1 and mask & 0b1000)


def test_preempted_running_jobs_free_their_gpus(instance: Instance) -> None:
    state = ClusterState(instance, preempted=frozenset({"r1"}))
    assert state.free_mask(0) == ALL & ~0b100  # r2 still holds GPU 2
    assert state.free_mask(1) == ALL & ~0b1000
    assert levels(state.gpu_profile(0), (0, 300)) == [1, 0]
    assert levels(state.gpu_profile(1), (0,)) == [0]
    assert levels(state.cpu_profile(0), (0,)) == [0]
    assert levels(state.tenant_profile("t"), (0,)) == [0]
    assert state.first_end_at(0) == 300
    assert state.first_end_at(1) == math.inf


def test_commit_of_a_start_takes_its_exact_gpus(instance: Instance) -> None:
    state = ClusterState(instance)
    state.commit(0, Placement(0, 50, A100, (1,), (2,), (0b11_0000,)))
    assert state.free_mask(1) == ALL & ~0b1 & ~0b1000 & ~0b11_0000
    assert levels(state.gpu_profile(1), (0, 50, 100)) == [3, 1, 0]
    assert levels(state.cpu_profile(1), (0, 50)) == [18, 10]
    assert state.first_end_at(1) == 50
    assert state.free_mask(0) == ALL & ~0b111  # other nodes untouched


def test_commit_of_a_planned_job_takes_only_counts(instance: Instance) -> None:
    state = ClusterState(instance)
    state.commit(1, Placement(300, 500, A100, (0,), (4,)))
    assert state.free_mask(0) == ALL & ~0b111  # no GPU id is reserved in the future
    assert levels(state.gpu_profile(0), (0, 299, 300, 499, 500)) == [3, 1, 4, 4, 0]
    assert state.first_end_at(0) == 100
    # A planned spread job: its CPU split by its counts per node.
    state.commit(0, Placement(100, 150, A100, (0, 1), (1, 1)))
    assert levels(state.cpu_profile(0), (100, 150)) == [4, 0]
    assert levels(state.cpu_profile(1), (100, 150)) == [4, 0]
    assert state.free_mask(1) == ALL & ~0b1 & ~0b1000


def test_take_now_marks_gpus_busy_now_and_nothing_later(instance: Instance) -> None:
    state = ClusterState(instance)
    before = state.gpu_profile(0)
    state.take_now(0, 0b1000)
    assert state.free_mask(0) == ALL & ~0b1111
    after = state.gpu_profile(0)
    assert (after.times, after.levels) == (before.times, before.levels)


def test_tenant_profiles(instance: Instance) -> None:
    state = ClusterState(instance)
    assert levels(state.tenant_profile("t"), (0, 100)) == [3, 0]
    assert levels(state.tenant_profile("u"), (0, 300)) == [1, 0]
    assert levels(state.tenant_profile("nobody"), (0,)) == [0]
    state.commit(0, Placement(100, 150, A100, (0,), (2,)))
    assert levels(state.tenant_profile("t"), (0, 100, 150)) == [3, 2, 0]
    assert levels(state.tenant_profile("u"), (100, 150)) == [1, 1]


def test_quota_fit_waits_for_the_tenant_to_release(instance: Instance) -> None:
    state = ClusterState(instance)
    q0, q1 = instance.queue[0], instance.queue[1]
    assert state.quota_releases(q0) == [100]
    assert state.quota_fit(q0, 0, 50) == 100  # t holds 3 of its 4 until 100
    assert state.quota_fit(q0, 0, 50, give_up=99) == math.inf
    assert state.quota_fit(q1, 7, 200) == 7  # u has no quota
    assert state.quota_releases(q1) == []


def test_what_it_returns_is_a_copy(instance: Instance) -> None:
    state = ClusterState(instance)
    for read in (state.gpu_profile(0), state.cpu_profile(0), state.tenant_profile("t")):
        read.add(0, 1000, 50)
    assert levels(state.gpu_profile(0), (0,)) == [3]
    assert levels(state.cpu_profile(0), (0,)) == [20]
    assert levels(state.tenant_profile("t"), (0,)) == [3]


def test_a_copy_is_independent(instance: Instance) -> None:
    state = ClusterState(instance)
    twin = state.copy()
    twin.commit(0, Placement(0, 50, A100, (1,), (2,), (0b11_0000,)))
    twin.take_now(0, 0b1000)
    assert state.free_mask(1) == ALL & ~0b1 & ~0b1000
    assert state.free_mask(0) == ALL & ~0b111
    assert levels(state.gpu_profile(1), (0,)) == [1]
    assert levels(state.tenant_profile("t"), (0,)) == [3]
    assert state.first_end_at(1) == 100
    state.commit(1, Placement(300, 500, A100, (0,), (4,)))
    assert levels(twin.gpu_profile(0), (300,)) == [0]
    assert twin.free_from(0, 8) == 300
    assert state.free_from(0, 8) == 500


def test_node_fit_and_part_fit_wait_for_gpus_and_cpu(instance: Instance) -> None:
    state = ClusterState(instance)
    q1, q2, q3 = instance.queue[1], instance.queue[2], instance.queue[3]
    assert state.node_fit(0, 0, 200, q1) == 0  # 3 used + 4 fit in 8
    assert state.node_fit(0, 0, 10, q2) == 300  # all 8: when r2 ends
    assert state.node_fit(0, 0, 10, q2, give_up=299) == math.inf
    assert state.part_fit(0, 0, 10, 6, q2) == 100  # 6 of them: when r1 ends
    assert state.node_fit(1, 0, 10, q3) == 0  # 50 CPUs: n1 has 54 spare
    assert state.part_fit(0, 0, 10, 2, q3) == 100  # n0 has 44 spare until r1 ends
    assert state.free_from(0, 5) == 1
    assert state.free_from(0, 6) == 100
    assert state.free_from(0, 8) == 300


def test_fits_now_once_running_jobs_are_released(instance: Instance) -> None:
    state = ClusterState(instance)
    r1, r2 = instance.running
    q2 = instance.queue[2]
    assert not state.fits_now(q2, 10, {0: 8})
    assert not state.fits_now(q2, 10, {0: 8}, released=[r1])
    assert state.fits_now(q2, 10, {0: 8}, released=[r1, r2])
    assert levels(state.gpu_profile(0), (0,)) == [3]  # the state itself is untouched
    q0 = instance.queue[0]
    assert not state.fits_now(q0, 50, {1: 2})  # t's quota
    assert state.fits_now(q0, 50, {1: 2}, released=[r1])


def test_room_counts_free_gpus_now_and_spare_cpu(instance: Instance) -> None:
    state = ClusterState(instance)
    q0, q3 = instance.queue[0], instance.queue[3]
    assert state.room_at(0, 0) == 5
    assert state.room_at(1, 0) == 6
    assert state.room_at(0, 100) == 7
    state.take_now(0, 0b1000)
    assert state.room_at(0, 0) == 4  # free ids now, not counts
    assert state.room(q0, 0, 0, 50) == 4
    assert state.room(q3, 0, 0, 50) == 1  # 44 spare CPUs at 25 per GPU
    assert state.room(q3, 0, 100, 50) == 2  # 64 spare CPUs, 7 unused GPUs
    total = state.group_use([0, 1])
    assert levels(total, (0, 100, 300)) == [4, 1, 0]


def test_best_placement_asks_the_states_search(instance: Instance) -> None:
    search = PlacementSearch(prefer="best-fit")
    state = ClusterState(instance, search=search)
    for position in range(len(instance.queue)):
        found = state.best_placement(position)
        assert found == search.best_placement(state, position)
    assert state.copy().best_placement(1) == state.best_placement(1)
    with pytest.raises(ValueError, match="unknown placement preference"):
        PlacementSearch(prefer="nearest")


@pytest.mark.parametrize("family", ["hetero", "fragmented", "mixed"])
def test_the_running_jobs_usage_is_what_adding_each_job_in_turn_gives(family: str) -> None:
    from whale_opt.generate import generate

    instance = generate(family, gpus=256, queued=20, seed=3)
    state = ClusterState(instance)
    gpu: dict[int, Profile] = {}
    cpu: dict[int, Profile] = {}
    tenants: dict[str, Profile] = {}
    for job in instance.running:
        nodes = [instance.parse_gpu(g).node for g in job.gpu_ids]
        for node in dict.fromkeys(nodes):
            count = nodes.count(node)
            gpu.setdefault(node, Profile()).add(0, job.remaining_s, count)
            cpu.setdefault(node, Profile()).add(0, job.remaining_s, job.cpu * (count / len(nodes)))
        tenants.setdefault(job.tenant, Profile()).add(0, job.remaining_s, len(nodes))
    assert gpu, "the instance has running jobs"
    for node, expected in gpu.items():
        assert (state.gpu_profile(node).times, state.gpu_profile(node).levels) == (
            expected.times,
            expected.levels,
        )
        assert state.cpu_profile(node).levels == cpu[node].levels
    for tenant, expected in tenants.items():
        assert state.tenant_profile(tenant).levels == expected.levels
