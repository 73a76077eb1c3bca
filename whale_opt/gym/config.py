"""The environment's parameters: one frozen, validated record, as the simulator has.

:class:`GymConfig` says which cluster and which trace an episode replays,
how the simulator runs (a :class:`~whale_opt.sim.SimConfig`), and the shape
of the spaces (queue slots, placement preferences, padded node rows). It
checks itself on construction and raises
:class:`~whale_opt.problem_data.FieldError` naming the field and the bad value.

Cluster and trace come from files or from the synthetic families:

- ``cluster``: an :class:`~whale_opt.problem_data.Instance` with no jobs, a
  path to an instance@1 file (its jobs are dropped: the trace brings them),
  or None for :func:`~whale_opt.sim.synthetic_cluster` of ``gpus`` GPUs of
  ``family``;
- ``trace``: a tuple of :class:`~whale_opt.sim.TraceJob`, a path to any
  trace :func:`~whale_opt.sim.read_trace` reads, or None for a fresh
  :func:`~whale_opt.sim.synthetic_trace` of ``n_jobs`` jobs at ``load`` each
  episode (seeded from the environment's random generator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whale_opt.io import read_instance
from whale_opt.placement.search import PREFERENCES
from whale_opt.policies.learned_encoding import QUEUE_ORDERS, Encoding
from whale_opt.problem_data import FieldError, Instance
from whale_opt.sim import SimConfig, TraceJob, read_trace, synthetic_cluster

ILLEGAL_ACTIONS = ("reject", "raise")
FAMILIES = ("hetero", "mixed", "dgx1", "fragmented")


def _require(ok: bool, path: str, value: Any, message: str) -> None:
    if not ok:
        raise FieldError(path, value, message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class GymConfig:
    """Everything an episode of :class:`~whale_opt.gym.env.GpuClusterEnv` depends on.

    Parameters
    ----------
    cluster, gpus, family, cluster_seed
        The cluster (see the module docstring); ``gpus``, ``family`` and
        ``cluster_seed`` shape the synthetic one when ``cluster`` is None.
    trace, n_jobs, load, median_duration_s
        The jobs (see the module docstring); the other three shape the
        synthetic trace drawn each episode when ``trace`` is None.
    sim
        How the simulator runs: rounds, duration noise, failures, limits,
        ``check_decisions``. Its ``seed`` is replaced each episode by one the
        environment draws; its ``policy`` is unused (the agent decides).
    queue_slots
        K: the head of the queue the agent sees and picks from.
    preferences
        The placement preferences (:data:`whale_opt.placement.search.PREFERENCES`)
        whose best start-now placement on each GPU type is a candidate:
        C = GPU types x preferences candidates per job.
    max_nodes
        Node rows of the observation (padded with zeros); None: the cluster's
        node count. A cluster with more nodes is refused.
    reward_scale
        Rewards are multiplied by this (1.0: the return is minus the weighted
        JCT in seconds, as :func:`~whale_opt.sim.metrics.summarize` reports it).
    illegal_action
        ``"reject"``: an action the mask forbids changes nothing and is
        answered with reward 0 and ``info["illegal_action"] = True``;
        ``"raise"``: it raises ValueError.
    queue_order
        Which queued jobs fill the K slots first: ``"submit"`` (queue order,
        the default) or ``"smith"`` (the ``wspt`` order: class rank, then
        weight / (GPUs x duration)), so the jobs a good schedule starts
        first are in view when the queue is longer than K.
    work_conserving
        Advancing is illegal while a shown job could start (the agent picks
        what starts and where, never whether to wait): fewer, easier
        choices; without it (the default) the agent may hold GPUs back.
    auto_advance
        Advance without a step whenever no shown job can start (advancing is
        the only legal action), so every step is a real choice; False (the
        default): every round is a step of its own, the agent advances it.
    """

    cluster: Instance | str | Path | None = None
    gpus: int = 32
    family: str = "hetero"
    cluster_seed: int = 0
    trace: tuple[TraceJob, ...] | str | Path | None = None
    n_jobs: int = 64
    load: float = 0.9
    median_duration_s: float = 7200.0
    sim: SimConfig = field(default_factory=SimConfig)
    queue_slots: int = 8
    preferences: tuple[str, ...] = ("end",)
    max_nodes: int | None = None
    reward_scale: float = 1.0
    illegal_action: str = "reject"
    auto_advance: bool = False
    queue_order: str = "submit"
    work_conserving: bool = False

    def __post_init__(self) -> None:
        _require(
            self.cluster is None or isinstance(self.cluster, Instance | str | Path),
            "cluster",
            self.cluster,
            "must be an Instance, a path to an instance file, or None (synthetic)",
        )
        _require(_is_int(self.gpus) and self.gpus >= 1, "gpus", self.gpus, "must be an int >= 1")
        _require(self.family in FAMILIES, "family", self.family, f"must be one of {FAMILIES}")
        _require(_is_int(self.cluster_seed), "cluster_seed", self.cluster_seed, "must be an int")
        _require(
            self.trace is None or isinstance(self.trace, tuple | str | Path),
            "trace",
            self.trace,
            "must be a tuple of TraceJob, a path to a trace file, or None (synthetic)",
        )
        if isinstance(self.trace, tuple):
            _require(
                bool(self.trace) and all(isinstance(job, TraceJob) for job in self.trace),
                "trace",
                self.trace,
                "must hold at least one TraceJob, and only TraceJobs",
            )
        _require(
            _is_int(self.n_jobs) and self.n_jobs >= 1, "n_jobs", self.n_jobs, "must be an int >= 1"
        )
        for name in ("load", "median_duration_s", "reward_scale"):
            value = getattr(self, name)
            _require(
                isinstance(value, int | float) and math.isfinite(value) and value > 0,
                name,
                value,
                "must be a finite number > 0",
            )
        _require(isinstance(self.sim, SimConfig), "sim", self.sim, "must be a SimConfig")
        _require(
            _is_int(self.queue_slots) and self.queue_slots >= 1,
            "queue_slots",
            self.queue_slots,
            "must be an int >= 1",
        )
        _require(
            isinstance(self.preferences, tuple)
            and bool(self.preferences)
            and len(set(self.preferences)) == len(self.preferences)
            and all(p in PREFERENCES for p in self.preferences),
            "preferences",
            self.preferences,
            f"must be a non-empty tuple of distinct names from {PREFERENCES}",
        )
        _require(
            self.max_nodes is None or (_is_int(self.max_nodes) and self.max_nodes >= 1),
            "max_nodes",
            self.max_nodes,
            "must be an int >= 1 or None",
        )
        _require(
            isinstance(self.work_conserving, bool),
            "work_conserving",
            self.work_conserving,
            "must be a bool",
        )
        _require(
            isinstance(self.auto_advance, bool),
            "auto_advance",
            self.auto_advance,
            "must be a bool",
        )
        _require(
            self.queue_order in QUEUE_ORDERS,
            "queue_order",
            self.queue_order,
            f"must be one of {QUEUE_ORDERS}",
        )
        _require(
            self.illegal_action in ILLEGAL_ACTIONS,
            "illegal_action",
            self.illegal_action,
            f"must be one of {ILLEGAL_ACTIONS}",
        )

    def load_cluster(self) -> Instance:
        """The cluster, without jobs (read or generated once per environment)."""
        if self.cluster is None:
            return synthetic_cluster(self.gpus, family=self.family, seed=self.cluster_seed)
        if isinstance(self.cluster, Instance):
            return self.cluster
        return read_instance(self.cluster).replace(running=(), queue=())

    def encoding(self, cluster: Instance) -> Encoding:
        """What the agent sees of ``cluster``'s rounds (what a checkpoint records)."""
        return Encoding.for_cluster(
            cluster,
            self.queue_slots,
            self.max_nodes,
            preferences=self.preferences,
            queue_order=self.queue_order,
            work_conserving=self.work_conserving,
        )

    def load_trace(self) -> tuple[TraceJob, ...] | None:
        """The fixed trace, or None when each episode draws a synthetic one."""
        if self.trace is None or isinstance(self.trace, tuple):
            return self.trace
        return read_trace(self.trace)
