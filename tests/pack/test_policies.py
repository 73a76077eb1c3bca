"""Each packing policy places only where a pod fits, and scores as the reference does."""

from __future__ import annotations

import numpy as np
import pytest

from whale_opt.pack import POLICIES, PackState, Placement, arrange, pods_of
from whale_opt.pack.policies import (
    BestFitPolicy,
    ClusteringPolicy,
    DotProdPolicy,
    PackingPolicy,
    RandomPolicy,
)
from whale_opt.pack.trace import MILLI, PackCluster, PodList

from .builders import cluster_of, pod


@pytest.mark.parametrize("name", sorted(n for n in POLICIES if not n.startswith("cpsat-")))
def test_every_policy_places_only_where_the_pod_fits(
    name: str, tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    rng = np.random.default_rng(3)
    pods = pods_of(tiny_pods, tiny_cluster)
    policy = POLICIES[name](tiny_pods, tiny_cluster)
    state = PackState(tiny_cluster)
    state.shuffle_ties(rng)
    placed = 0
    for index in arrange(tiny_pods, tiny_cluster.gpu_capacity_milli, 1.3, rng):
        p = pods[index]
        placement = policy.place(state, p, rng)
        if placement is None:
            assert not state.feasible(p).any()  # dropped only when it fits nowhere
            continue
        assert state.fits(p, placement)
        assert p.allowed[state.model[placement.node]] or p.num_gpu == 0
        state.place(p, placement)
        placed += 1
        assert (state.free >= 0).all() and (state.free <= MILLI).all()
        assert (state.cpu_left >= 0).all() and (state.memory_left >= 0).all()
    assert placed > 0
    assert state.used_milli == MILLI * state.gpu_count.sum() - state.free.sum()


def test_ties_go_to_the_first_node_of_the_seeded_order() -> None:
    cluster = cluster_of(*[(64_000, 2, "T4")] * 5)
    state = PackState(cluster)
    state.rank = np.array([3, 1, 4, 0, 2])
    rng = np.random.default_rng(0)
    assert BestFitPolicy().place(state, pod(cluster), rng) == Placement(3, (0,))
    state.shuffle_ties(np.random.default_rng(1))
    first = int(np.argmin(state.rank))
    assert PackingPolicy().place(state, pod(cluster), rng) == Placement(first, (0,))


def test_best_fit_takes_the_node_with_least_left() -> None:
    cluster = cluster_of((96_000, 8, "G2"), (96_000, 8, "G2"), (16_000, 2, "P100"))
    state = PackState(cluster)
    state.place(pod(cluster, cpu=40_000, num_gpu=4), Placement(1, (0, 1, 2, 3)))
    share = pod(cluster, cpu=4_000, milli=500)
    scores = BestFitPolicy().scores(state, share)
    # int((1 - (0.5 (C - c)/128000 + 0.5 (G - g)/8000)) * 100), G and g in milli
    expected = [
        int((1 - (0.5 * 92 / 128 + 0.5 * 7.5 / 8)) * 100),  # 17: idle G2
        int((1 - (0.5 * 52 / 128 + 0.5 * 3.5 / 8)) * 100),  # 57: half-used G2
        int((1 - (0.5 * 12 / 128 + 0.5 * 1.5 / 8)) * 100),  # 85: small P100 node
    ]
    assert scores.tolist() == expected
    placement = BestFitPolicy().place(state, share, np.random.default_rng(0))
    assert placement == Placement(2, (0,))


def test_dot_product_prefers_the_least_aligned_leftover() -> None:
    cluster = cluster_of((96_000, 8, "G2"), (16_000, 8, "G2"))
    state = PackState(cluster)
    cpu_heavy = pod(cluster, cpu=16_000, num_gpu=1)
    scores = DotProdPolicy().scores(state, cpu_heavy)
    assert scores[1] > scores[0]  # less CPU left: less aligned with a CPU-heavy ask


def test_packing_prefers_shared_gpus_then_used_nodes_then_idle_ones() -> None:
    cluster = cluster_of((96_000, 8, "G2"), (96_000, 8, "G2"), (96_000, 8, "G2"))
    state = PackState(cluster)
    state.place(pod(cluster, milli=600), Placement(0, (5,)))  # 400 left on GPU 5
    state.place(pod(cluster, num_gpu=1), Placement(1, (0,)))  # a used node
    share = pod(cluster, milli=300)
    assert PackingPolicy().scores(state, share).tolist() == [96, 49, 25]
    assert PackingPolicy().place(state, share, np.random.default_rng(0)) == Placement(0, (5,))
    whole = pod(cluster, num_gpu=2)
    assert PackingPolicy().scores(state, whole).tolist() == [48, 48, 25]


def test_clustering_keeps_classes_together() -> None:
    cluster = cluster_of((96_000, 8, "G2"), (96_000, 8, "G2"), (96_000, 8, "G2"))
    state = PackState(cluster)
    state.place(pod(cluster, milli=500), Placement(0, (0,)))  # shares
    state.place(pod(cluster, num_gpu=1), Placement(1, (0,)))  # 1-GPU pods
    scores = ClusteringPolicy().scores(state, pod(cluster, milli=200))
    assert scores.tolist() == [75 + 25 * 500 // 8000, 0 + 25 * 1000 // 8000, 25]
    assert ClusteringPolicy().scores(state, pod(cluster, num_gpu=0)).tolist() == [0, 0, 0]


def test_random_picks_a_random_fitting_gpu_for_a_share() -> None:
    cluster = cluster_of((96_000, 8, "G2"))
    state = PackState(cluster)
    picks = {
        RandomPolicy().place(state, pod(cluster, milli=100), np.random.default_rng(s)).gpus
        for s in range(40)
    }
    assert len(picks) > 1
