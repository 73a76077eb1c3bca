"""frag-aware and the cpsat rounds: valid placements, never less than FGD, small cases."""

from __future__ import annotations

import numpy as np
import pytest

from whale_opt.pack import (
    POLICIES,
    FgdPolicy,
    PackState,
    Placement,
    TargetWorkload,
    arrange,
    pods_of,
)
from whale_opt.pack.batch import CpsatBatchPolicy, placed_request, trial
from whale_opt.pack.batch_model import BatchModel
from whale_opt.pack.experiment import decisions
from whale_opt.pack.frag_aware import FragAwarePolicy
from whale_opt.pack.trace import PackCluster, PodList

from .builders import cluster_of, pod
from .checker import violations

OURS = ("frag-aware", "cpsat-b1", "cpsat-b16", "cpsat-b64")


def _workload(*shapes: tuple[int, int, int, float], models: int = 1) -> TargetWorkload:
    """A target workload of (cpu, milli, num_gpu, frequency) shapes, any model."""
    return TargetWorkload(
        cpu=np.array([s[0] for s in shapes], dtype=np.int64),
        milli=np.array([s[1] for s in shapes], dtype=np.int64),
        num_gpu=np.array([s[2] for s in shapes], dtype=np.int64),
        spec=("",) * len(shapes),
        frequency=np.array([s[3] for s in shapes]),
        allowed=np.ones((len(shapes), models), dtype=bool),
    )


def test_the_checker_catches_each_broken_rule() -> None:
    cluster = cluster_of((8_000, 2, "T4"), (8_000, 1, "V100"))
    share, whole = pod(cluster, milli=600), pod(cluster, num_gpu=1)
    assert violations(cluster, [(share, Placement(0, (0,))), (share, Placement(0, (1,)))]) == []
    assert "past 1000" in violations(cluster, [(share, Placement(0, (0,)))] * 2)[0]
    assert (
        "whole-GPU"
        in violations(cluster, [(share, Placement(0, (0,))), (whole, Placement(0, (0,)))])[0]
    )
    assert "no GPU 2" in violations(cluster, [(whole, Placement(0, (2,)))])[0]
    assert "CPU" in violations(cluster, [(pod(cluster, cpu=9_000), Placement(1, (0,)))])[0]
    t4_only = pod(cluster, models=("T4",))
    assert "not allowed" in violations(cluster, [(t4_only, Placement(1, (0,)))])[0]
    assert "distinct" in violations(cluster, [(pod(cluster, num_gpu=2), Placement(0, (1, 1)))])[0]


@pytest.mark.parametrize("name", OURS)
def test_every_placement_is_valid_and_only_what_cannot_fit_is_dropped(
    name: str, tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    rng = np.random.default_rng(11)
    requests = pods_of(tiny_pods, tiny_cluster)
    policy = POLICIES[name](tiny_pods, tiny_cluster)
    if isinstance(policy, CpsatBatchPolicy):
        policy.seconds = 0.05  # a short budget keeps the test fast; validity does not depend on it
    order = arrange(tiny_pods, tiny_cluster.gpu_capacity_milli, 1.3, rng)
    offers = [requests[i] for i in order]
    state = PackState(tiny_cluster)
    state.shuffle_ties(rng)
    record = []
    size = getattr(policy, "batch_size", 1)
    for step, (p, placement) in enumerate(decisions(policy, state, offers, rng), start=1):
        if placement is not None:
            state.place(p, placement)
        record.append((p, placement))
        if step % size == 0 or step == len(offers):  # a batch is done: its drops fit nowhere
            batch = record[-(step - 1) % size - 1 :]
            assert not any(state.feasible(q).any() for q, d in batch if d is None)
    assert violations(tiny_cluster, record) == []
    assert 0 < state.placed < len(offers)


def test_frag_aware_keeps_the_big_node_whole_for_the_pods_only_it_can_host() -> None:
    cluster = cluster_of((96_000, 8, "G2"), (96_000, 1, "G2"))
    workload = _workload((4_000, 1000, 8, 0.2), (4_000, 1000, 1, 0.8))
    state = PackState(cluster)
    one_gpu = pod(cluster, cpu=4_000)
    # on node 0 it costs the 8-GPU shape's copy; on node 1 only one 1-GPU copy
    assert FragAwarePolicy(workload).place(state, one_gpu, np.random.default_rng(0)) == Placement(
        1, (0,)
    )


def test_frag_aware_puts_a_share_on_the_gpu_it_fills_best() -> None:
    cluster = cluster_of((96_000, 4, "G2"))
    workload = _workload((1_000, 500, 1, 0.5), (1_000, 1000, 1, 0.5))
    state = PackState(cluster)
    state.place(pod(cluster, milli=500), Placement(0, (2,)))
    state.place(pod(cluster, milli=700), Placement(0, (3,)))
    share = pod(cluster, milli=300)
    # GPU 3 (300 free) loses no copy of either shape; GPU 2 loses a 500 copy; 0 or 1 a whole GPU
    assert FragAwarePolicy(workload).place(state, share, np.random.default_rng(0)) == Placement(
        0, (3,)
    )


def test_the_model_fits_more_than_a_greedy_that_blocks_itself() -> None:
    cluster = cluster_of((8_000, 2, "T4"), (8_000, 1, "T4"))
    batch = [pod(cluster, cpu=2_000), pod(cluster, cpu=2_000, num_gpu=2, shape=1)]
    state = PackState(cluster)
    workload = _workload((2_000, 1000, 1, 1.0))
    fgd = FgdPolicy(workload)
    bad_hint = [Placement(0, (0,)), None]  # the 1-GPU pod on the 2-GPU node: no room for the other
    nodes = [np.array([0, 1]), np.array([0])]
    result = BatchModel(state, batch, nodes, fgd, bad_hint).solve(1.0)
    assert result.status == "OPTIMAL"
    assert result.decisions == [Placement(1, (0,)), Placement(0, (0, 1))]
    assert violations(cluster, list(zip(batch, result.decisions, strict=True))) == []


def test_the_model_drops_a_small_share_for_a_larger_pod() -> None:
    cluster = cluster_of((8_000, 2, "T4"))
    batch = [pod(cluster, milli=300), pod(cluster, num_gpu=2, shape=1)]
    state = PackState(cluster)
    fgd = FgdPolicy(_workload((1_000, 300, 1, 1.0)))
    hint = trial(state, batch, fgd, np.random.default_rng(0))
    assert hint[1] is None  # one at a time, the share breaks a GPU first
    nodes = [np.array([0]), np.array([0])]
    result = BatchModel(state, batch, nodes, fgd, hint).solve(1.0)
    assert result.decisions == [None, Placement(0, (0, 1))]


def test_the_model_keeps_the_hint_when_it_loses_nothing() -> None:
    cluster = cluster_of((16_000, 2, "T4"), (16_000, 2, "T4"))
    batch = [
        pod(cluster, milli=300),
        pod(cluster, milli=600, shape=1),
        pod(cluster, num_gpu=0, shape=2),
    ]
    state = PackState(cluster)
    fgd = FgdPolicy(_workload((1_000, 300, 1, 0.5), (1_000, 1000, 1, 0.5)))
    hint = [Placement(1, (1,)), Placement(1, (1,)), Placement(0, ())]
    nodes = [np.array([0, 1])] * 3
    result = BatchModel(state, batch, nodes, fgd, hint).solve(1.0)
    assert result.decisions == hint


def test_a_batch_never_places_less_gpu_request_than_fgd(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    requests = pods_of(tiny_pods, tiny_cluster)
    workload = TargetWorkload.of(tiny_pods, tiny_cluster)
    policy = CpsatBatchPolicy(FragAwarePolicy.of(tiny_pods, tiny_cluster), FgdPolicy(workload), 16)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        state = PackState(tiny_cluster)
        state.shuffle_ties(rng)
        order = arrange(tiny_pods, tiny_cluster.gpu_capacity_milli, 1.3, rng)
        warm = int(rng.integers(len(order) // 3, len(order) // 2))
        record = []
        for i in order[:warm]:  # a part-full cluster from FGD
            placement = FgdPolicy(workload).place(state, requests[i], rng)
            if placement is not None:
                state.place(requests[i], placement)
            record.append((requests[i], placement))
        batch = [requests[i] for i in order[warm : warm + 16]]
        fgd = trial(state, batch, FgdPolicy(workload), rng)
        free, cpu = state.free.copy(), state.cpu_left.copy()
        chosen = policy.place_batch(state, batch, rng)
        assert (state.free == free).all() and (state.cpu_left == cpu).all()  # left as it was
        assert placed_request(batch, chosen) >= placed_request(batch, fgd)
        assert violations(tiny_cluster, record + list(zip(batch, chosen, strict=True))) == []
    assert policy.log.solves > 0 and policy.log.gained_milli > 0  # the model did run, and helped
