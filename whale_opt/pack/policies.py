"""The packing policies of the FGD study, behind one small Protocol.

Each re-implements a score plugin of the published simulator
(hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/``) as
its node-by-node score, vectorised over the nodes with numpy. As in the
reference: a pod goes to a feasible node of highest score; scores are
integers (Go's ``int64(...)`` truncation), which is what makes ties, and a
tie goes to the first node of a node order drawn once per run from the seed
(:meth:`~whale_opt.pack.state.PackState.best`; the reference names its
nodes with a random prefix per seed and its scheduler takes the first of
equal nodes). Inside the chosen node, a share goes to the
fitting GPU with the least free milli and whole GPUs are the lowest-index
free ones, except for Random (a random fitting GPU) and FGD
(:mod:`whale_opt.pack.fgd`, its own choice).

- **Random**: a uniformly random feasible node.
- **DotProd** (Tetris): ``1 - <free, request> / 2`` over (CPU / 128 cores,
  GPU milli / 8 GPUs): the node whose leftover is least aligned with the ask.
- **Clustering**: nodes already holding pods of the same class (share, or k
  whole GPUs) and only that class first, then mixed ones, idle ones, others;
  inside a band, fuller nodes.
- **Packing**: partly used GPUs first (the fuller the better), then free GPUs
  on a used node, then idle nodes.
- **BestFit**: the least leftover, 0.5 x CPU/128 cores + 0.5 x GPU/8 GPUs.

CPU-only pods score 0 everywhere under Clustering and Packing (the
reference's plugins ignore them), so they go to the first feasible node of the
run's order: a first fit.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from whale_opt.pack.state import MILLI, PackState, Placement, Pod, best_fit_gpus

MAX_SPEC_CPU = 128_000.0  # CPU milli of the largest node, the reference's normaliser
MAX_SPEC_GPU = 8_000.0  # GPU milli of the largest node
MAX_SCORE = 100

IntArray = npt.NDArray[np.int64]


class PackPolicy(Protocol):
    """Anything with a ``name`` that picks a node and GPUs for one pod, or None."""

    name: str

    def place(self, state: PackState, pod: Pod, rng: np.random.Generator) -> Placement | None:
        """Where ``pod`` goes now (a node it fits on), or None when it fits nowhere."""
        ...


def truncate(values: npt.NDArray[np.float64]) -> IntArray:
    """Go's ``int64(x)``: toward zero."""
    return np.trunc(values).astype(np.int64)


class _ScoredPolicy:
    """A policy that scores every node (higher is better) and picks GPUs by best fit."""

    name = ""

    def scores(self, state: PackState, pod: Pod) -> IntArray:
        """The integer score of every node for ``pod`` (only feasible ones count)."""
        raise NotImplementedError

    def place(self, state: PackState, pod: Pod, rng: np.random.Generator) -> Placement | None:
        """The best feasible node (ties: the run's node order), its GPUs by best fit."""
        ok = state.feasible(pod)
        node = state.best(self.scores(state, pod), ok)
        if node < 0:
            return None
        return Placement(node, best_fit_gpus(state, pod, node))


class RandomPolicy:
    """A uniformly random feasible node; a share on a random fitting GPU."""

    name = "Random"

    def place(self, state: PackState, pod: Pod, rng: np.random.Generator) -> Placement | None:
        """See the class docstring."""
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates) == 0:
            return None
        node = int(candidates[rng.integers(len(candidates))])
        if pod.fractional:
            fitting = np.flatnonzero(state.free[node] >= pod.milli)
            return Placement(node, (int(fitting[rng.integers(len(fitting))]),))
        return Placement(node, best_fit_gpus(state, pod, node))


class DotProdPolicy(_ScoredPolicy):
    """Tetris's alignment score with the reference's ``merge`` and ``max`` settings."""

    name = "DotProd"

    def scores(self, state: PackState, pod: Pod) -> IntArray:
        """``int(100 * (1 - (C/128k * c/128k + G/8k * g/8k) / 2))`` per node."""
        cpu = (state.cpu_left / MAX_SPEC_CPU) * (pod.cpu / MAX_SPEC_CPU)
        gpu = (state.total_free / MAX_SPEC_GPU) * (pod.gpu_request / MAX_SPEC_GPU)
        return truncate(MAX_SCORE * (1 - (cpu + gpu) / 2))


class BestFitPolicy(_ScoredPolicy):
    """The least leftover after placing, half CPU and half GPU."""

    name = "BestFit"

    def scores(self, state: PackState, pod: Pod) -> IntArray:
        """``int((1 - (0.5 (C - c)/128k + 0.5 (G - g)/8k)) * 100)`` per node."""
        left = ((state.cpu_left - pod.cpu) / MAX_SPEC_CPU) * 0.5
        left = left + ((state.total_free - pod.gpu_request) / MAX_SPEC_GPU) * 0.5
        return truncate((1.0 - left) * MAX_SCORE)


class ClusteringPolicy(_ScoredPolicy):
    """Pods of one class together (Gandiva-like GPU clustering)."""

    name = "Clustering"

    def scores(self, state: PackState, pod: Pod) -> IntArray:
        """Bands of 25 (same class only, same class among others, idle, other classes),
        plus ``25 * used GPU milli / 8000`` inside a band (integer arithmetic)."""
        if pod.num_gpu == 0:
            return np.zeros(state.size, dtype=np.int64)
        fullness = (MAX_SCORE // 4) * (int(MAX_SPEC_GPU) - state.total_free) // int(MAX_SPEC_GPU)
        mine = state.classes[:, pod.affinity] > 0
        kinds = state.class_kinds
        band = np.where(mine, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return (fullness + band).astype(np.int64)


class PackingPolicy(_ScoredPolicy):
    """Shared GPUs first, then free GPUs on used nodes, then idle nodes."""

    name = "Packing"

    def scores(self, state: PackState, pod: Pod) -> IntArray:
        """The reference's three cases, each capped into its own range of scores."""
        if pod.num_gpu == 0:
            return np.zeros(state.size, dtype=np.int64)
        full = state.full_count
        idle = full == state.gpu_count
        idle_score = np.maximum(MAX_SCORE // 3 - full, full)
        if not pod.fractional:  # whole GPUs are always fully free ones
            used_score = np.full(state.size, max(MAX_SCORE // 2 - pod.num_gpu, MAX_SCORE // 3))
        else:
            tightest = np.where(state.free >= pod.milli, state.free, MILLI + 1).min(axis=1)
            shared = np.maximum(MAX_SCORE - (tightest * 100 // MILLI) // 10, MAX_SCORE // 2)
            fresh = max(MAX_SCORE // 2 - 1, MAX_SCORE // 3)
            used_score = np.where(tightest == MILLI, fresh, shared)
        return np.where(idle, idle_score, used_score).astype(np.int64)
