"""The CP-SAT model of one batch of arriving pods.

For each pod of the batch: placed or not, and where, among its candidate
nodes (:func:`candidate_nodes`). A share takes one GPU with the milli free;
a k-GPU pod takes k GPUs that are whole and free at the batch's start (and
no share of the batch may go on them); a CPU-only pod takes CPU and memory
only. A node's CPU and memory bound the batch's pods on it. GPU model
constraints hold because every candidate node is feasible for its pod.

The objective, lexicographic through its weights:

1. the GPU request placed (milli): what "unallocated GPU %" counts;
2. each pod placed where the hint (the better greedy run) put it: when the
   model must move pods to fit more, it moves as few as it can, so the rest
   keep the greedy's fragmentation-aware choices;
3. FGD's score of each placement at the batch's start,
   ``int(100 * sigmoid(-dF / 1000))``: among the moves, the ones that grow
   expected fragmentation least.

Term 1 outweighs any sum of 2 and 3; 2 outweighs any sum of 3. The model is
split like the engine's: :class:`Variables`, :class:`Constraints` (one
method per family), :class:`Objective`, wired by :class:`BatchModel`, which
hints, solves and decodes. A solve reports a status; it never raises.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from whale_opt.pack.fgd import FgdPolicy, score
from whale_opt.pack.frag_aware import FragAwarePolicy
from whale_opt.pack.state import MILLI, PackState, Placement, Pod

IntArray = npt.NDArray[np.int64]
Decisions = list[Placement | None]
SCORE_MAX = 100  # FGD's score is 0..100


def candidate_nodes(
    state: PackState,
    batch: Sequence[Pod],
    fgd: FgdPolicy,
    anchor: FragAwarePolicy,
    count: int,
    greedy: Sequence[Decisions],
) -> list[IntArray]:
    """Per pod: the ``count`` // 2 best nodes by FGD's growth of F and by frag-aware's
    loss of capacity (each at the batch's start), and the greedy runs' own nodes."""
    half = max(1, count // 2)
    out = []
    for i, pod in enumerate(batch):
        nodes, growth = fgd.growth(state, pod)
        chosen = {d.node for d in (run[i] for run in greedy) if d is not None}
        if len(nodes):
            loss = anchor.losses(state, pod, nodes)
            if pod.fractional:
                loss = np.where(state.free[nodes] >= pod.milli, loss, np.inf)
            rank = state.rank[nodes]
            for values in (growth.min(axis=1), loss.min(axis=1)):
                best = np.lexsort((rank, values))[:half]
                chosen.update(int(n) for n in nodes[best])
        out.append(np.array(sorted(chosen), dtype=np.int64))
    return out


class Variables:
    """The model's Booleans: pod i on (node, GPU) for shares, on a node otherwise;
    and for each whole free GPU of a node some k-GPU pod may use, whether one takes it."""

    def __init__(
        self, model: cp_model.CpModel, state: PackState, batch: Sequence[Pod], nodes: list[IntArray]
    ) -> None:
        self.share: dict[tuple[int, int, int], cp_model.IntVar] = {}
        self.node: dict[tuple[int, int], cp_model.IntVar] = {}
        self.whole: dict[tuple[int, int], cp_model.IntVar] = {}
        self.pod: list[list[cp_model.IntVar]] = [[] for _ in batch]
        with_whole: set[int] = set()
        for i, pod in enumerate(batch):
            for n in nodes[i].tolist():
                if pod.fractional:
                    for g in np.flatnonzero(state.free[n] >= pod.milli).tolist():
                        v = self.share[i, n, g] = model.new_bool_var(f"s{i}_{n}_{g}")
                        self.pod[i].append(v)
                    continue
                v = self.node[i, n] = model.new_bool_var(f"p{i}_{n}")
                self.pod[i].append(v)
                if pod.num_gpu and n not in with_whole:
                    with_whole.add(n)
                    for g in np.flatnonzero(state.free[n] == MILLI).tolist():
                        self.whole[n, g] = model.new_bool_var(f"w{n}_{g}")

    def of_pod(self, i: int) -> list[cp_model.IntVar]:
        """Every placement variable of pod ``i``."""
        return self.pod[i]

    def on_node(self) -> dict[int, list[tuple[int, cp_model.IntVar]]]:
        """Per node: (pod, variable) of every placement on it."""
        out: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for (i, n, _), v in self.share.items():
            out[n].append((i, v))
        for (i, n), v in self.node.items():
            out[n].append((i, v))
        return out


class Constraints:
    """The capacity rules of :class:`~whale_opt.pack.state.PackState`, for the batch."""

    def __init__(
        self, model: cp_model.CpModel, state: PackState, batch: Sequence[Pod], variables: Variables
    ) -> None:
        self.model, self.state, self.batch, self.vars = model, state, batch, variables

    def add_constraints(self) -> None:
        """Every family, in order."""
        self._each_pod_at_most_once()
        self._whole_gpus_taken()
        self._shares_fit_their_gpu()
        self._node_cpu_and_memory()

    def _each_pod_at_most_once(self) -> None:
        """A pod is placed once or dropped."""
        for i in range(len(self.batch)):
            self.model.add_at_most_one(self.vars.of_pod(i))

    def _whole_gpus_taken(self) -> None:
        """The k-GPU pods on a node take exactly as many of its whole free GPUs."""
        taken: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for (i, n), v in self.vars.node.items():
            if self.batch[i].num_gpu:
                taken[n].append((self.batch[i].num_gpu, v))
        gpus: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for (n, _), v in self.vars.whole.items():
            gpus[n].append(v)
        for n, pods in taken.items():
            self.model.add(sum(k * v for k, v in pods) == sum(gpus[n]))

    def _shares_fit_their_gpu(self) -> None:
        """The shares on a GPU fit its free milli, and none go on a GPU a k-GPU pod takes."""
        on_gpu: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for (i, n, g), v in self.vars.share.items():
            on_gpu[n, g].append((self.batch[i].milli, v))
        for (n, g), shares in on_gpu.items():
            room = int(self.state.free[n, g])
            whole = self.vars.whole.get((n, g))
            used = sum(m * v for m, v in shares)
            if whole is None:
                if sum(m for m, _ in shares) > room:
                    self.model.add(used <= room)
            else:
                self.model.add(used + MILLI * whole <= room)

    def _node_cpu_and_memory(self) -> None:
        """The batch's pods on a node fit its CPU and memory left."""
        for n, pods in self.vars.on_node().items():
            cpu = [(self.batch[i].cpu, v) for i, v in pods]
            memory = [(self.batch[i].memory, v) for i, v in pods]
            if sum(c for c, _ in cpu) > self.state.cpu_left[n]:
                self.model.add(sum(c * v for c, v in cpu) <= int(self.state.cpu_left[n]))
            if sum(m for m, _ in memory) > self.state.memory_left[n]:
                self.model.add(sum(m * v for m, v in memory) <= int(self.state.memory_left[n]))


class Objective:
    """Placed GPU request, then the hint's choices kept, then FGD's score (module docstring)."""

    def __init__(
        self,
        model: cp_model.CpModel,
        state: PackState,
        batch: Sequence[Pod],
        variables: Variables,
        fgd: FgdPolicy,
        hint: Decisions,
    ) -> None:
        self.model, self.state, self.batch, self.vars = model, state, batch, variables
        self.fgd, self.hint = fgd, hint

    def set_objective(self) -> None:
        """Maximise the weighted sum of the three terms."""
        scores = self._scores()
        size = len(self.batch)
        agree_weight = size * SCORE_MAX + 1  # one pod's term 2 outweighs all of term 3
        request = size * (agree_weight + SCORE_MAX) + 1  # a milli of term 1 outweighs 2 + 3
        terms = []
        for (i, n, g), v in self.vars.share.items():
            agree = self.hint[i] == Placement(n, (g,))
            weight = (
                request * self.batch[i].gpu_request
                + agree_weight * agree
                + scores[i].get((n, g), 0)
            )
            terms.append(weight * v)
        for (i, n), v in self.vars.node.items():
            decision = self.hint[i]
            agree = decision is not None and decision.node == n
            weight = (
                request * self.batch[i].gpu_request
                + agree_weight * agree
                + scores[i].get((n, 0), 0)
            )
            terms.append(weight * v)
        self.model.maximize(sum(terms))

    def _scores(self) -> list[dict[tuple[int, int], int]]:
        """FGD's score of each pod on each (node, GPU) at the batch's start."""
        out = []
        for pod in self.batch:
            nodes, growth = self.fgd.growth(self.state, pod)
            values = score(np.zeros_like(growth), growth)
            cells = {}
            for row, n in enumerate(nodes.tolist()):
                for g in range(growth.shape[1]):
                    if np.isfinite(growth[row, g]):
                        cells[n, g] = int(values[row, g])
            out.append(cells)
        return out


@dataclass(frozen=True)
class BatchResult:
    """A solve's status name and, if it found a solution, a decision per pod."""

    status: str
    decisions: Decisions | None


class BatchModel:
    """Variables, constraints and objective of one batch, hinted with a greedy run."""

    def __init__(
        self,
        state: PackState,
        batch: Sequence[Pod],
        nodes: list[IntArray],
        fgd: FgdPolicy,
        hint: Decisions,
    ) -> None:
        self.state, self.batch = state, batch
        self.model = cp_model.CpModel()
        self.vars = Variables(self.model, state, batch, nodes)
        Constraints(self.model, state, batch, self.vars).add_constraints()
        Objective(self.model, state, batch, self.vars, fgd, hint).set_objective()
        self._add_hint(hint)

    def _add_hint(self, hint: Decisions) -> None:
        """A complete hint: every variable set as ``hint`` places the batch."""
        taken: set[tuple[int, int]] = set()
        for i, decision in enumerate(hint):
            if decision is not None and self.batch[i].num_gpu and not self.batch[i].fractional:
                taken.update((decision.node, g) for g in decision.gpus)
        for (i, n, g), v in self.vars.share.items():
            self.model.add_hint(v, hint[i] == Placement(n, (g,)))
        for (i, n), v in self.vars.node.items():
            decision = hint[i]
            self.model.add_hint(v, decision is not None and decision.node == n)
        for key, v in self.vars.whole.items():
            self.model.add_hint(v, key in taken)

    def solve(self, seconds: float) -> BatchResult:
        """Solve with a deterministic-time budget of ``seconds``, one worker; decode."""
        solver = cp_model.CpSolver()
        solver.parameters.max_deterministic_time = seconds
        solver.parameters.max_time_in_seconds = 10 * seconds  # a guard on a loaded machine
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = 0
        status = solver.solve(self.model)
        name = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return BatchResult(name, None)
        return BatchResult(name, self._decode(solver))

    def _decode(self, solver: cp_model.CpSolver) -> Decisions:
        """A placement per pod: its GPU for a share, whole GPUs marked taken for k-GPU pods."""
        out: Decisions = [None] * len(self.batch)
        for (i, n, g), v in self.vars.share.items():
            if solver.boolean_value(v):
                out[i] = Placement(n, (g,))
        free: dict[int, list[int]] = defaultdict(list)
        for (n, g), v in sorted(self.vars.whole.items()):
            if solver.boolean_value(v):
                free[n].append(g)
        for (i, n), v in sorted(self.vars.node.items()):
            if solver.boolean_value(v):
                k = self.batch[i].num_gpu
                out[i] = Placement(n, tuple(free[n][:k]))
                free[n] = free[n][k:]
        return out
