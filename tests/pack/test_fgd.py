"""FGD: the target workload, the expected fragmentation, and FGD's choices."""

from __future__ import annotations

import math

import numpy as np

from whale_opt.pack import FgdPolicy, PackState, Placement, TargetWorkload, arrange, pods_of
from whale_opt.pack.fgd import Fragmentation
from whale_opt.pack.trace import PackCluster, PodList

from .builders import cluster_of, pod


def _frag_by_definition(workload: TargetWorkload, free: np.ndarray, cpu: int, model: int) -> float:
    """F_n(M) as the paper (and FGD_STUDY.md) words it, one shape at a time."""
    total = float(free.sum())
    value = 0.0
    for m in range(len(workload)):
        p, milli, count = workload.frequency[m], workload.milli[m], workload.num_gpu[m]
        fits = (
            milli > 0
            and workload.allowed[m, model]
            and cpu >= workload.cpu[m]
            and int((free >= milli).sum()) >= count
        )
        value += p * (float(free[free < milli].sum()) if fits else total)
    return value


def _fragmentation(frag: Fragmentation, free: np.ndarray, cpu: int, model: int) -> float:
    count, usable = frag.levels(free[None, :])
    return float(frag.value(np.array([cpu]), np.array([model]), free.sum()[None], count, usable)[0])


def test_the_target_workload_is_the_popular_shapes_covering_95_percent(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    workload = TargetWorkload.of(tiny_pods, tiny_cluster)
    assert math.isclose(float(workload.frequency.sum()), 1.0)
    assert (np.diff(workload.frequency) <= 1e-12).all()  # most frequent first
    keys = list(
        zip(tiny_pods.cpu_milli, tiny_pods.milli, tiny_pods.num_gpu, tiny_pods.spec, strict=True)
    )
    counts = [
        keys.count((c, m, k, s))
        for c, m, k, s in zip(
            workload.cpu, workload.milli, workload.num_gpu, workload.spec, strict=True
        )
    ]
    assert sum(counts) >= 0.95 * len(tiny_pods) > sum(counts[:-1])


def test_fragmentation_matches_its_definition_on_random_nodes(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    workload = TargetWorkload.of(tiny_pods, tiny_cluster)
    frag = Fragmentation(workload)
    rng = np.random.default_rng(5)
    for _ in range(300):
        free = np.zeros(8, dtype=np.int64)
        gpus = int(rng.integers(1, 9))
        free[:gpus] = rng.choice([0, 90, 190, 460, 540, 1000, 1000], gpus)
        cpu, model = int(rng.integers(0, 64_000)), int(rng.integers(len(tiny_cluster.models)))
        expected = _frag_by_definition(workload, free, cpu, model)
        assert math.isclose(_fragmentation(frag, free, cpu, model), expected, abs_tol=1e-6)


def test_a_hand_computed_fragmentation() -> None:
    workload = TargetWorkload(
        cpu=np.array([4_000, 2_000, 8_000]),
        milli=np.array([500, 1000, 0]),
        num_gpu=np.array([1, 1, 0]),
        spec=("", "", ""),
        frequency=np.array([0.5, 0.3, 0.2]),
        allowed=np.ones((3, 1), dtype=bool),
    )
    free = np.array([300, 1000])  # 1300 free: 300 is too little for either GPU shape
    # half-GPU: fits, 300 is fragment; whole: fits, 300; CPU-only: all 1300
    expected = 0.5 * 300 + 0.3 * 300 + 0.2 * 1300
    frag = Fragmentation(workload)
    assert math.isclose(_fragmentation(frag, free, 16_000, 0), expected)
    # with 3 cores left the half-GPU shape (4 cores) does not fit: its view is all fragment
    assert math.isclose(_fragmentation(frag, free, 3_000, 0), 0.5 * 1300 + 0.3 * 300 + 0.2 * 1300)
    # with 1 core left no shape fits: everything is fragment
    assert math.isclose(_fragmentation(frag, free, 1_000, 0), 1300.0)


def test_fgd_picks_a_spot_where_fragmentation_grows_least(
    tiny_cluster: PackCluster, tiny_pods: PodList
) -> None:
    workload = TargetWorkload.of(tiny_pods, tiny_cluster)
    policy, rng = FgdPolicy(workload), np.random.default_rng(11)
    pods = pods_of(tiny_pods, tiny_cluster)
    state = PackState(tiny_cluster)

    def score(before: float, after: float) -> int:
        return int(1.0 / (1.0 + math.exp(-(before - after) / 1000.0)) * 100.0)

    for index in arrange(tiny_pods, tiny_cluster.gpu_capacity_milli, 1.3, rng):
        p = pods[index]
        placement = policy.place(state, p, rng)
        if placement is None:
            continue
        options: dict[tuple[int, tuple[int, ...]], int] = {}
        for node in np.flatnonzero(state.feasible(p)):
            free, cpu, model = state.free[node], int(state.cpu_left[node]), int(state.model[node])
            before = _frag_by_definition(workload, free, cpu, model)
            gpu_sets = (
                [(g,) for g in range(int(state.gpu_count[node])) if free[g] >= p.milli]
                if p.fractional
                else [tuple(np.flatnonzero(free == 1000)[: p.num_gpu].tolist())]
            )
            for gpus in gpu_sets:
                after = free.copy()
                after[list(gpus)] -= p.milli
                options[(int(node), gpus)] = score(
                    before, _frag_by_definition(workload, after, cpu - p.cpu, model)
                )
        best = max(options.values())
        assert options[(placement.node, placement.gpus)] == best
        state.place(p, placement)


def test_fgd_fills_a_partly_used_gpu_before_breaking_a_whole_one() -> None:
    cluster = cluster_of((96_000, 8, "G2"))
    workload = TargetWorkload(
        cpu=np.array([1_000, 1_000]),
        milli=np.array([1000, 500]),
        num_gpu=np.array([1, 1]),
        spec=("", ""),
        frequency=np.array([0.5, 0.5]),
        allowed=np.ones((2, 1), dtype=bool),
    )
    state = PackState(cluster)
    state.place(pod(cluster, milli=500), Placement(0, (3,)))
    placement = FgdPolicy(workload).place(state, pod(cluster, milli=500), np.random.default_rng(0))
    assert placement == Placement(0, (3,))
