"""The packing state's accounting: GPU shares, whole GPUs, CPU-only pods, models."""

from __future__ import annotations

import numpy as np
import pytest

from whale_opt.pack import PackState, Placement, read_pods
from whale_opt.pack.state import best_fit_gpus, pods_of
from whale_opt.pack.trace import PackCluster, PodList

from .builders import OPENB, cluster_of, pod


def test_shares_never_take_a_gpu_past_1000_milli() -> None:
    cluster = cluster_of((64_000, 2, "T4"))
    state = PackState(cluster)
    share = pod(cluster, num_gpu=1, milli=400)
    state.place(share, Placement(0, (0,)))
    state.place(share, Placement(0, (0,)))
    assert state.free[0].tolist() == [200, 1000]
    with pytest.raises(ValueError, match="does not fit"):
        state.place(share, Placement(0, (0,)))  # 200 left, 400 asked
    assert state.free[0, 0] == 200
    assert not state.fits(share, Placement(0, (0,)))
    assert state.fits(share, Placement(0, (1,)))
    assert state.used_milli == 800


def test_multi_gpu_pods_take_whole_free_gpus() -> None:
    cluster = cluster_of((64_000, 4, "V100M16"))
    state = PackState(cluster)
    state.place(pod(cluster, milli=300), Placement(0, (1,)))
    pair = pod(cluster, num_gpu=2, milli=1000)
    assert not state.fits(pair, Placement(0, (0, 1)))  # GPU 1 is partly used
    assert best_fit_gpus(state, pair, 0) == (0, 2)  # the lowest-index whole free ones
    state.place(pair, Placement(0, (0, 2)))
    assert state.free[0].tolist() == [0, 700, 0, 1000]
    assert state.full_count[0] == 1
    assert not state.feasible(pair)[0]  # one whole GPU left, two asked


def test_cpu_only_pods_take_only_cpu_and_memory() -> None:
    cluster = cluster_of((8_000, 2, "P100"), memory=4_000)
    state = PackState(cluster)
    cpu_pod = pod(cluster, cpu=6_000, num_gpu=0, memory=3_000)
    assert not state.fits(cpu_pod, Placement(0, (0,)))  # no GPU for a CPU-only pod
    state.place(cpu_pod, Placement(0, ()))
    assert state.cpu_left[0] == 2_000 and state.memory_left[0] == 1_000
    assert state.free[0].tolist() == [1000, 1000] and state.used_milli == 0
    assert not state.feasible(pod(cluster, cpu=3_000, num_gpu=0))[0]  # CPU left: 2 cores
    assert not state.feasible(pod(cluster, cpu=1_000, num_gpu=0, memory=2_000))[0]  # memory
    assert state.feasible(pod(cluster, cpu=1_000, num_gpu=1, milli=1000, memory=500))[0]


def test_the_gpu_model_constraint_is_honoured() -> None:
    cluster = cluster_of((64_000, 2, "T4"), (64_000, 2, "P100"), (64_000, 0, ""))
    state = PackState(cluster)
    t4_only = pod(cluster, models=("T4",))
    assert state.feasible(t4_only).tolist() == [True, False, False]
    assert not state.fits(t4_only, Placement(1, (0,)))
    anywhere = pod(cluster)
    assert state.feasible(anywhere).tolist() == [True, True, False]  # node 2 has no GPU
    cpu_only = pod(cluster, num_gpu=0)
    assert state.feasible(cpu_only).tolist() == [True, True, True]


def test_pods_of_keeps_shares_multi_gpu_cpu_only_and_specs(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    pods = pods_of(tiny_pods, tiny_cluster)
    assert len(pods) == 60
    assert sum(p.num_gpu == 0 for p in pods) == 4
    assert sum(p.fractional for p in pods) == 18
    assert sum(p.num_gpu == 8 for p in pods) == 5
    constrained = [p for p in pods if not p.allowed.all()]
    assert len(constrained) == 19
    for p in pods:  # one shape per (cpu, milli, num_gpu)
        same = [q for q in pods if (q.cpu, q.milli, q.num_gpu) == (p.cpu, p.milli, p.num_gpu)]
        assert {q.shape for q in same} == {p.shape}


def test_feasible_agrees_with_fits_on_a_busy_state(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    pods = pods_of(tiny_pods, tiny_cluster)
    state = PackState(tiny_cluster)
    for p in pods:  # first fit, by best-fit GPUs
        ok = np.flatnonzero(state.feasible(p))
        if len(ok):
            state.place(p, Placement(int(ok[0]), best_fit_gpus(state, p, int(ok[0]))))
    for p in pods:
        feasible = state.feasible(p)
        for node in range(state.size):
            fits = feasible[node] and state.fits(p, Placement(node, best_fit_gpus(state, p, node)))
            assert bool(feasible[node]) == bool(fits)


def test_a_bad_pod_list_names_file_line_and_column() -> None:
    from whale_opt.io import InputError

    with pytest.raises(InputError) as caught:
        read_pods(OPENB / "openb_pod_list_bad.csv")
    message = str(caught.value)
    assert "openb_pod_list_bad.csv" in message and "line 5" in message
    assert "gpu_milli" in message and "1500" in message


def test_unplace_gives_back_exactly_what_place_took() -> None:
    cluster = cluster_of((32_000, 4, "T4"))
    state = PackState(cluster)
    before = (state.free.copy(), state.cpu_left.copy(), state.classes.copy(), state.used_milli)
    share, whole = pod(cluster, milli=300), pod(cluster, num_gpu=2)
    state.place(share, Placement(0, (1,)))
    state.place(whole, Placement(0, (2, 3)))
    state.unplace(whole, Placement(0, (2, 3)))
    state.unplace(share, Placement(0, (1,)))
    after = (state.free, state.cpu_left, state.classes, state.used_milli)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert state.placed == 0 and state.class_kinds[0] == 0 and state.full_count[0] == 4
    with pytest.raises(ValueError, match="was not on"):
        state.unplace(share, Placement(0, (0,)))
