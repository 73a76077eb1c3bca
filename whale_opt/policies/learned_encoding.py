"""The learned policy's encoding: the round built one start at a time, and the
observation vector the network reads.

:class:`PartialRound` holds a round's picks and each shown job's candidate
placements, :class:`Layout` turns it into the observation vector, and
:meth:`PartialRound.decision` assembles the decision like every solver's.
The Gymnasium environment (:mod:`whale_opt.gym`, which trains the network)
and the ``learned`` policy (:mod:`whale_opt.policies.learned`) share them;
they live here, below both (DESIGN.md lets ``gym`` import policies, never the
reverse). :class:`Encoding` is what a checkpoint records of them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.placement.records import Placement, to_job_decision
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.serial import assemble, complete
from whale_opt.placement.state import ClusterState
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance, tenant_quota, waited_s

QUEUE_ORDERS = ("submit", "smith")
DEFERRED_REASON = "not started by the agent this round"
HOUR = 3600.0
JOB_FIXED = 6
TOTALS = 4
CAP = 1e6  # features without a natural bound (hours, weights, counts) are capped here


@dataclass(frozen=True)
class Encoding:
    """The shape of a trained network's world: what it sees and what it may pick.

    ``gpu_types`` and ``classes`` fix the columns, ``slots`` (K) the queued
    jobs shown, ``max_nodes`` the node rows, ``scale`` the GPU count that
    counts as 1, ``preferences`` the candidates per GPU type, and
    ``queue_order`` which jobs are shown first (``"submit"``: queue order;
    ``"smith"``: :func:`~whale_opt.policies.wspt.wspt_order`), and
    ``work_conserving`` whether the round may close while a shown job could
    still start.
    """

    gpu_types: tuple[str, ...]
    classes: tuple[str, ...]
    slots: int
    max_nodes: int
    scale: float
    preferences: tuple[str, ...] = ("end",)
    queue_order: str = "submit"
    work_conserving: bool = False

    @classmethod
    def for_cluster(
        cls, cluster: Instance, slots: int, max_nodes: int | None = None, **rest: Any
    ) -> Encoding:
        """The encoding of ``cluster`` (max_nodes: its node count when None)."""
        nodes = len(cluster.nodes)
        if max_nodes is not None and nodes > max_nodes:
            raise ValueError(f"cluster {cluster.name!r} has {nodes} nodes, max_nodes {max_nodes}")
        return cls(
            gpu_types=tuple(cluster.gpu_types),
            classes=tuple(cluster.priority_classes),
            slots=slots,
            max_nodes=max_nodes or nodes,
            scale=float(max(node.gpu_count for node in cluster.nodes)),
            **rest,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Encoding:
        """The encoding a checkpoint's JSON holds (:meth:`to_dict`)."""
        fields = dict(data)
        for name in ("gpu_types", "classes", "preferences"):
            fields[name] = tuple(fields[name])
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @property
    def width(self) -> int:
        """C: candidates per job (GPU types x preferences)."""
        return len(self.gpu_types) * len(self.preferences)

    @property
    def actions(self) -> int:
        """K x C picks, then advance."""
        return self.slots * self.width + 1

    def misfit(self, instance: Instance) -> str | None:
        """Why ``instance`` cannot be encoded (None: it can)."""
        unknown = set(instance.gpu_types) - set(self.gpu_types)
        if unknown:
            return f"GPU types {sorted(unknown)} were not in training"
        classes = set(instance.priority_classes) - set(self.classes)
        if classes:
            return f"priority classes {sorted(classes)} were not in training"
        if len(instance.nodes) > self.max_nodes:
            return f"{len(instance.nodes)} nodes, the network sees {self.max_nodes}"
        return None


class PartialRound:
    """The round waiting for its decision, and the starts picked so far.

    Job ``j``'s candidate ``c = type x P + p`` is its best placement starting
    now on GPU type ``type`` under preference ``p`` (P preferences), or None.
    A candidate reads only the nodes of its type and, through a quota, its
    tenant's usage, so a pick drops only those cached candidates.
    ``waiting``: the queued jobs not picked, in the encoding's queue order.
    """

    def __init__(self, instance: Instance, encoding: Encoding) -> None:
        self.instance = instance
        self.types = encoding.gpu_types
        self.per_type = len(encoding.preferences)
        first = ClusterState(instance, search=PlacementSearch(encoding.preferences[0]))
        self.states = [first] + [
            ClusterState(instance, topologies=first.topologies, search=PlacementSearch(p))
            for p in encoding.preferences[1:]
        ]
        index = {name: k for k, name in enumerate(self.types)}
        self.node_type = np.array([index[node.gpu_type] for node in instance.nodes], dtype=np.int64)
        self.free_by_type = np.bincount(
            self.node_type, weights=first.free_counts(), minlength=len(self.types)
        ).astype(np.int64)
        self.eligible = [tuple(index[t] for t in names) for names in instance.eligible_types]
        smith = encoding.queue_order == "smith"
        self.waiting: list[int] = (
            wspt_order(instance) if smith else list(range(len(instance.queue)))
        )
        self.work_conserving = encoding.work_conserving
        self.picked: dict[int, Placement] = {}
        # queue position -> type index -> the best start-now placement per preference
        self._cache: dict[int, dict[int, tuple[Placement | None, ...]]] = {}

    @property
    def width(self) -> int:
        """C: candidates per job."""
        return len(self.types) * self.per_type

    @property
    def state(self) -> ClusterState:
        """The first preference's state (every state has the same GPUs free now)."""
        return self.states[0]

    def candidates(self, position: int) -> list[Placement | None]:
        """The C candidates of queued job ``position`` on the state as it is now."""
        job = self.instance.queue[position]
        found = self._cache.setdefault(position, {})
        out: list[Placement | None] = [None] * self.width
        for t in self.eligible[position]:
            if self.free_by_type[t] < job.gpu_count:
                continue  # starting now needs that many free GPUs of the type
            if t not in found:
                found[t] = self._search(position, t)
            out[t * self.per_type : (t + 1) * self.per_type] = found[t]
        return out

    def fresh_candidates(self, position: int) -> list[Placement | None]:
        """:meth:`candidates` searched again from scratch (no cache, no shortcut)."""
        out: list[Placement | None] = [None] * self.width
        for t in range(len(self.types)):
            out[t * self.per_type : (t + 1) * self.per_type] = self._search(position, t)
        return out

    def _search(self, position: int, t: int) -> tuple[Placement | None, ...]:
        name = self.types[t]
        if name not in self.instance.eligible_types[position]:
            return (None,) * self.per_type
        found = []
        for state in self.states:
            placement = state.best_placement(position, 0, gpu_type=name)
            # latest_start=0 asks for a start now; anything else is not a candidate.
            found.append(placement if placement is not None and placement.start == 0 else None)
        return tuple(found)

    def mask(self, slots: int) -> np.ndarray:
        """Legal actions: ``slot x C + c`` for each shown job's candidates, then advance.

        Advancing is illegal while a shown job could start and nothing runs
        and nothing was picked this round (an agent may wait for something,
        but not leave the whole cluster idle with work it could run), or at
        all when the round is work-conserving.
        """
        width = self.width
        legal = np.zeros(slots * width + 1, dtype=bool)
        for slot, position in enumerate(self.waiting[:slots]):
            found = self.candidates(position)
            legal[slot * width : (slot + 1) * width] = [p is not None for p in found]
        idle = not self.instance.running and not self.picked
        legal[-1] = not ((idle or self.work_conserving) and legal[:-1].any())
        return legal

    def commit(self, slot: int, candidate: int) -> tuple[int, Placement]:
        """Start the job shown in ``slot`` on its ``candidate``; returns (position, placement).

        Raises ValueError when there is no such job or candidate.
        """
        if not 0 <= slot < len(self.waiting):
            raise ValueError(f"no queued job in slot {slot}")
        position = self.waiting[slot]
        placement = self.candidates(position)[candidate]
        if placement is None:
            raise ValueError(f"job in slot {slot} has no candidate {candidate} now")
        for state in self.states:
            state.commit(position, placement)
        del self.waiting[slot]
        self.picked[position] = placement
        self._cache.pop(position, None)
        job = self.instance.queue[position]
        t = candidate // self.per_type
        self.free_by_type[t] -= job.gpu_count
        for found in self._cache.values():
            found.pop(t, None)
        if tenant_quota(self.instance, job.tenant) is not None:
            for other, found in self._cache.items():
                if self.instance.queue[other].tenant == job.tenant:
                    found.clear()
        return position, placement

    def decision(self, solver: str = "gym-agent", bound: float = 0.0) -> Decision:
        """The round's decision: the picks started, running jobs kept, the rest deferred."""
        started = time.perf_counter()
        instance = self.instance
        decided = {
            position: to_job_decision(instance, position, placement)
            for position, placement in self.picked.items()
        }
        for position in self.waiting:
            job_id = instance.queue[position].id
            decided[position] = JobDecision(job_id, Action.DEFERRED, reason=DEFERRED_REASON)
        jobs = complete(instance, decided)
        return assemble(instance, solver, jobs, Status.FEASIBLE, bound, started)


class Layout:
    """Where each feature sits in the observation vector (see :mod:`whale_opt.gym.observe`)."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding = encoding
        self.types, self.classes = encoding.gpu_types, encoding.classes
        self.slots, self.max_nodes, self.scale = encoding.slots, encoding.max_nodes, encoding.scale
        self.node_width = len(self.types) + 3
        self.job_width = JOB_FIXED + 2 * len(self.types) + len(self.classes)
        self.size = self.max_nodes * self.node_width + self.slots * self.job_width + TOTALS
        t_count = len(self.types)
        job = np.ones(self.job_width, dtype=np.float32)
        job[1:5] = CAP  # GPUs (a gang may span nodes), duration, wait, weight
        job[JOB_FIXED + t_count : JOB_FIXED + 2 * t_count] = CAP
        self.high = np.concatenate(
            [
                np.ones(self.max_nodes * self.node_width, dtype=np.float32),
                np.tile(job, self.slots),
                np.array([CAP, CAP, CAP, 1.0], dtype=np.float32),
            ]
        )

    def node_rows(self, partial: PartialRound) -> np.ndarray:
        """Every node's row on the round's state, as a (max_nodes, node_width) array."""
        rows = np.zeros((self.max_nodes, self.node_width), dtype=np.float32)
        self.update_nodes(rows, partial, range(len(partial.instance.nodes)))
        return rows

    def update_nodes(self, rows: np.ndarray, partial: PartialRound, nodes: range | tuple) -> None:
        """Refill the rows of ``nodes`` (positions) from the round's state."""
        state = partial.state
        instance = partial.instance
        for n in nodes:
            node = instance.nodes[n]
            free = state.free_mask(n)
            row = rows[n]
            row[:] = 0.0
            row[partial.node_type[n]] = free.bit_count() / self.scale
            row[-3] = state.topology(n).largest_block(free) / self.scale
            row[-2] = state.healthy_count(n) / self.scale
            row[-1] = float(not node.down and not node.draining)

    def job_row(self, instance: Instance, position: int) -> np.ndarray:
        """Queued job ``position``'s slot row."""
        job = instance.queue[position]
        row = np.zeros(self.job_width, dtype=np.float32)
        durations = instance.durations[position]
        shortest = min(durations.values()) if durations else 0
        row[:JOB_FIXED] = (
            1.0,
            job.gpu_count / self.scale,
            shortest / HOUR,
            waited_s(job) / HOUR,
            job.weight,
            float(job.topology == "nvlink" and job.gpu_count > 1),
        )
        t_count = len(self.types)
        eligible = instance.eligible_types[position]
        for t, name in enumerate(self.types):
            if name in eligible:
                row[JOB_FIXED + t] = 1.0
                row[JOB_FIXED + t_count + t] = durations.get(name, 0) / HOUR
        row[JOB_FIXED + 2 * t_count + self.classes.index(job.priority_class)] = 1.0
        return row

    def totals(self, partial: PartialRound) -> tuple[float, ...]:
        """Queued jobs not shown, running jobs, picks this round, share of healthy GPUs free."""
        state, instance = partial.state, partial.instance
        healthy = sum(state.healthy_count(n) for n in range(len(instance.nodes)))
        return (
            float(max(0, len(partial.waiting) - self.slots)),
            float(len(instance.running) + len(partial.picked)),
            float(len(partial.picked)),
            float(partial.free_by_type.sum()) / max(healthy, 1),
        )

    def observe(
        self, node_rows: np.ndarray, job_rows: list[np.ndarray], totals: tuple[float, ...]
    ) -> np.ndarray:
        """The observation vector (a new array) from its parts."""
        out = np.zeros(self.size, dtype=np.float32)
        cut = self.max_nodes * self.node_width
        out[:cut] = node_rows.ravel()
        for slot, row in enumerate(job_rows[: self.slots]):
            start = cut + slot * self.job_width
            out[start : start + self.job_width] = row
        out[-TOTALS:] = totals
        return np.minimum(out, self.high, out=out)

    def observe_round(self, partial: PartialRound) -> np.ndarray:
        """The observation of ``partial`` built from scratch (the policy's; the
        environment keeps its rows between picks)."""
        instance = partial.instance
        rows = [self.job_row(instance, p) for p in partial.waiting[: self.slots]]
        return self.observe(self.node_rows(partial), rows, self.totals(partial))
