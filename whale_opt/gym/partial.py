"""One scheduling round as the agent builds it: its picks, their candidates, the decision.

A :class:`PartialRound` holds the round's instance (the simulator's
snapshot), one :class:`~whale_opt.placement.state.ClusterState` per placement
preference, the starts picked so far, and the queued jobs not picked yet
(``waiting``, in queue order: the agent sees the head of it). It reads and
changes the states through their public methods only: ``best_placement``
(start now: ``latest_start=0``), ``commit``, ``free_counts``, ``free_mask``,
``topology`` and ``healthy_count``.

Candidates. Job ``j``'s candidate ``c = type x P + p`` is the best
placement starting now on GPU type ``type`` (the cluster's order) under
preference ``p`` (:attr:`GymConfig.preferences`, P of them), or None. A
candidate reads only the nodes of its type and, through a quota, its
tenant's usage; so a pick invalidates only the cached candidates on the
type it took and, when its tenant has a quota, those of that tenant's jobs.
The tests compare the cache with a fresh search after every pick.

The decision (:meth:`PartialRound.decision`) starts the picked jobs on the
exact GPUs of their candidates, keeps every running job and defers the rest
of the queue (``deferred``, "not started by the agent this round"); it is
built by :func:`whale_opt.placement.serial.assemble`, like every solver's,
so it passes :func:`whale_opt.check.check`.
"""

from __future__ import annotations

import time

import numpy as np

from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.placement.records import Placement, to_job_decision
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.serial import assemble, complete
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance, tenant_quota

SOLVER = "gym-agent"
DEFERRED_REASON = "not started by the agent this round"


class PartialRound:
    """The round waiting for its decision, and the starts the agent has picked so far.

    Parameters
    ----------
    instance
        The round's instance (:attr:`whale_opt.sim.PendingRound.instance`).
    types
        The cluster's GPU type names, in candidate order.
    preferences
        Placement preferences, one :class:`ClusterState` each.
    """

    def __init__(
        self, instance: Instance, types: tuple[str, ...], preferences: tuple[str, ...]
    ) -> None:
        self.instance = instance
        self.types = types
        self.per_type = len(preferences)
        first = ClusterState(instance, search=PlacementSearch(preferences[0]))
        self.states = [first] + [
            ClusterState(instance, topologies=first.topologies, search=PlacementSearch(p))
            for p in preferences[1:]
        ]
        index = {name: k for k, name in enumerate(types)}
        self.node_type = np.array([index[node.gpu_type] for node in instance.nodes], dtype=np.int64)
        self.free_by_type = np.bincount(
            self.node_type, weights=first.free_counts(), minlength=len(types)
        ).astype(np.int64)
        self.eligible = [tuple(index[t] for t in names) for names in instance.eligible_types]
        self.waiting: list[int] = list(range(len(instance.queue)))
        self.picked: dict[int, Placement] = {}
        # queue position -> type index -> the best start-now placement per preference
        self._cache: dict[int, dict[int, tuple[Placement | None, ...]]] = {}

    @property
    def width(self) -> int:
        """C: candidates per job (GPU types x preferences)."""
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

        Advancing is illegal only while nothing runs, nothing was picked this
        round and a shown job could start: an agent may wait for something,
        but not leave the whole cluster idle with work it could run.
        """
        width = self.width
        legal = np.zeros(slots * width + 1, dtype=bool)
        for slot, position in enumerate(self.waiting[:slots]):
            found = self.candidates(position)
            legal[slot * width : (slot + 1) * width] = [p is not None for p in found]
        idle = not self.instance.running and not self.picked
        legal[-1] = not (idle and legal[:-1].any())
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

    def decision(self) -> Decision:
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
        return assemble(
            instance, SOLVER, complete(instance, decided), Status.FEASIBLE, 0.0, started
        )
