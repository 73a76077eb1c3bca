"""The packing experiment of the FGD study, one run and many.

One run (a trace, a policy, a seed): shuffle the pod list with the seed,
resize it until its GPU request is ``load`` (130%) of the cluster's GPU
capacity (above: delete uniformly random pods; below: append uniformly
random copies of pods of the original list, stopping at the first copy that
would pass the target), draw the node order that breaks ties between equal
scores, then offer the pods one at a time. A pod that fits nowhere is
dropped for good; it still counts as arrived. A batch policy
(:class:`~whale_opt.pack.batch.BatchPackPolicy`) gets them in batches of its
``batch_size`` instead, in the same order, and places each batch at once.

After every offer the run records the arrived GPU request (failed pods
included) and the allocated GPU milli. The curve is the reference's
reading of those records: for each arrived % g on the grid 0..130, the mean
allocated % of the records whose arrived % rounds to g (if none, those
within g +- 1), and unallocated % = 100 - allocated %. A study runs
several seeds and reports the mean and the sample standard deviation.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from whale_opt.pack.batch import BATCH_SIZES, BatchPackPolicy, CpsatBatchPolicy
from whale_opt.pack.fgd import FgdPolicy, TargetWorkload
from whale_opt.pack.frag_aware import FragAwarePolicy
from whale_opt.pack.policies import (
    BestFitPolicy,
    ClusteringPolicy,
    DotProdPolicy,
    PackingPolicy,
    PackPolicy,
    RandomPolicy,
)
from whale_opt.pack.state import PackState, Placement, Pod, pods_of
from whale_opt.pack.trace import PackCluster, PodList

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
LOAD = 1.3
GRID = np.arange(0, 131)  # arrived %, 1% buckets
FIRST_SEED = 42  # the reference's seeds are 42..51

PolicyFactory = Callable[[PodList, PackCluster], PackPolicy | BatchPackPolicy]


def _cpsat(batch_size: int) -> PolicyFactory:
    def make(pods: PodList, cluster: PackCluster) -> CpsatBatchPolicy:
        anchor = FragAwarePolicy.of(pods, cluster)
        return CpsatBatchPolicy(anchor, FgdPolicy(TargetWorkload.of(pods, cluster)), batch_size)

    return make


POLICIES: dict[str, PolicyFactory] = {
    "Random": lambda _, __: RandomPolicy(),
    "DotProd": lambda _, __: DotProdPolicy(),
    "Clustering": lambda _, __: ClusteringPolicy(),
    "Packing": lambda _, __: PackingPolicy(),
    "BestFit": lambda _, __: BestFitPolicy(),
    "FGD": lambda pods, cluster: FgdPolicy(TargetWorkload.of(pods, cluster)),
    "frag-aware": FragAwarePolicy.of,
    **{f"cpsat-b{size}": _cpsat(size) for size in BATCH_SIZES},
}
"""Policy name -> a factory given the (original) pod list and the cluster."""


def arrange(pods: PodList, capacity_milli: int, load: float, rng: np.random.Generator) -> IntArray:
    """The offer order: indices into ``pods``, shuffled, resized to ``load`` x capacity."""
    request = pods.gpu_request_milli
    order = list(rng.permutation(len(pods)))
    total = int(request.sum())
    target = load * capacity_milli
    while total > target and order:
        total -= int(request[order.pop(int(rng.integers(len(order))))])
    while total < target:
        copy = int(rng.integers(len(pods)))
        if total + int(request[copy]) > target:
            break
        order.append(copy)
        total += int(request[copy])
    return np.asarray(order, dtype=np.int64)


@dataclass(frozen=True)
class RunResult:
    """One run: the unallocated % curve on :data:`GRID`, counts, and its wall time."""

    unallocated: FloatArray
    offered: int
    placed: int
    seconds: float


def curve(arrived: IntArray, used: IntArray, capacity_milli: int) -> FloatArray:
    """Unallocated % on :data:`GRID` from the per-offer records, read as the reference does."""
    arrived_pct = np.round(arrived / capacity_milli * 100)
    alloc_pct = np.round(used / capacity_milli * 100, 2)
    out = np.full(len(GRID), np.nan)
    for i, g in enumerate(GRID):
        rows = alloc_pct[arrived_pct == g]
        if len(rows) == 0:
            rows = alloc_pct[(arrived_pct >= g - 1) & (arrived_pct <= g + 1)]
        if len(rows):
            out[i] = 100 - np.round(rows.mean(), 2)
    return out


def run_once(
    cluster: PackCluster,
    pods: PodList,
    policy: str,
    seed: int,
    load: float = LOAD,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """One run of the experiment (see the module docstring)."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    requests = pods_of(pods, cluster)
    place = POLICIES[policy](pods, cluster)
    order = arrange(pods, cluster.gpu_capacity_milli, load, rng)
    state = PackState(cluster)
    state.shuffle_ties(rng)
    arrived = np.zeros(len(order) + 1, dtype=np.int64)  # row 0: before the first offer
    used = np.zeros(len(order) + 1, dtype=np.int64)
    so_far = 0
    offers = [requests[i] for i in order]
    for step, (pod, placement) in enumerate(decisions(place, state, offers, rng), start=1):
        so_far += pod.gpu_request
        if placement is not None:
            state.place(pod, placement)
        arrived[step], used[step] = so_far, state.used_milli
        if progress is not None and step % 1000 == 0:
            progress(step)
    return RunResult(
        unallocated=curve(arrived, used, cluster.gpu_capacity_milli),
        offered=len(order),
        placed=state.placed,
        seconds=time.perf_counter() - started,
    )


def decisions(
    policy: PackPolicy | BatchPackPolicy,
    state: PackState,
    offers: Sequence[Pod],
    rng: np.random.Generator,
) -> Iterator[tuple[Pod, Placement | None]]:
    """Each offered pod and its placement, to be applied to ``state`` before the next.

    A :class:`BatchPackPolicy` decides each batch of ``batch_size`` pods when
    its first pod comes up; any other policy decides one pod at a time.
    """
    if isinstance(policy, BatchPackPolicy):
        size = policy.batch_size
        for start in range(0, len(offers), size):
            batch = offers[start : start + size]
            yield from zip(batch, policy.place_batch(state, batch, rng), strict=True)
        return
    for pod in offers:
        yield pod, policy.place(state, pod, rng)


@dataclass(frozen=True)
class StudyResult:
    """One trace under one policy over several seeds: curves per seed, mean and sd."""

    trace: str
    policy: str
    seeds: tuple[int, ...]
    curves: FloatArray  # [seed, GRID]
    seconds: float  # all runs, one after the other

    @property
    def mean(self) -> FloatArray:
        """Mean unallocated % over the seeds with a reading there, on :data:`GRID`."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a point no seed reads: NaN
            return np.asarray(np.nanmean(self.curves, axis=0))

    @property
    def sd(self) -> FloatArray:
        """Sample standard deviation over those seeds (NaN with fewer than two)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.asarray(np.nanstd(self.curves, axis=0, ddof=1))

    def at(self, arrived_pct: int = 100) -> tuple[float, float]:
        """(mean, sd) of unallocated % when the arrived request is ``arrived_pct``."""
        i = int(np.searchsorted(GRID, arrived_pct))
        return float(self.mean[i]), float(self.sd[i])


def study(
    trace: str,
    cluster: PackCluster,
    pods: PodList,
    policy: str,
    seeds: Sequence[int],
    load: float = LOAD,
    on_run: Callable[[RunResult], None] | None = None,
) -> StudyResult:
    """Run ``policy`` on ``pods`` once per seed, one after the other."""
    runs = []
    for seed in seeds:
        run = run_once(cluster, pods, policy, seed, load)
        runs.append(run)
        if on_run is not None:
            on_run(run)
    return combine(trace, policy, tuple(seeds), runs)


def combine(
    trace: str, policy: str, seeds: tuple[int, ...], runs: Sequence[RunResult]
) -> StudyResult:
    """A :class:`StudyResult` from its runs, in seed order."""
    return StudyResult(
        trace=trace,
        policy=policy,
        seeds=seeds,
        curves=np.array([run.unallocated for run in runs]),
        seconds=sum(run.seconds for run in runs),
    )
