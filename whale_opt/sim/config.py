"""The simulator's parameters: one frozen, validated record instead of keywords.

:class:`SimConfig` checks itself on construction and raises
:class:`~whale_opt.problem_data.FieldError` naming the field and the bad value,
like every record of the data model. :class:`Outage` is one line of a failure
trace: a node (or one GPU) down at a time, for a while; or a node draining
(no new work, running jobs go on) for a while.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from whale_opt.problem_data import FieldError, Instance


def _require(ok: bool, path: str, value: Any, message: str) -> None:
    if not ok:
        raise FieldError(path, value, message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_positive_int(path: str, value: Any) -> None:
    _require(value is None or (_is_int(value) and value >= 1), path, value, "must be an int >= 1")


OUTAGE_KINDS = ("fail", "drain")


@dataclass(frozen=True)
class Outage:
    """A node (or, with ``gpu``, one of its GPUs) fails at ``at_s`` for ``repair_s``.

    With ``kind="drain"`` the node instead drains for ``repair_s``: it takes
    no new work and its running jobs go on. Times are seconds from the start
    of the trace.
    """

    node: str
    at_s: int
    repair_s: int
    gpu: int | None = None
    kind: str = "fail"

    def __post_init__(self) -> None:
        _require(isinstance(self.node, str) and self.node != "", "node", self.node, "is empty")
        _require(_is_int(self.at_s) and self.at_s >= 0, "at_s", self.at_s, "must be an int >= 0")
        _require(
            _is_int(self.repair_s) and self.repair_s >= 1,
            "repair_s",
            self.repair_s,
            "must be an int >= 1",
        )
        _require(
            self.gpu is None or (_is_int(self.gpu) and self.gpu >= 0),
            "gpu",
            self.gpu,
            "must be a GPU index >= 0",
        )
        _require(
            self.kind in OUTAGE_KINDS,
            "kind",
            self.kind,
            f"must be one of {', '.join(OUTAGE_KINDS)}",
        )
        _require(
            self.kind == "fail" or self.gpu is None,
            "gpu",
            self.gpu,
            "a drain takes a whole node (no gpu)",
        )

    def check_on(self, cluster: Instance) -> None:
        """That the node (and GPU) the outage names are ``cluster``'s.

        Raises
        ------
        FieldError
            ``node`` names no node, or ``gpu`` is past the node's GPUs.
        """
        position = cluster.node_index.get(self.node)
        _require(position is not None, "node", self.node, "names no node of the cluster")
        assert position is not None
        count = cluster.nodes[position].gpu_count
        _require(
            self.gpu is None or self.gpu < count,
            "gpu",
            self.gpu,
            f"is out of range: node {self.node!r} has {count} GPUs",
        )


@dataclass(frozen=True)
class SimConfig:
    """Everything a simulation run depends on, besides the trace and the cluster.

    Parameters
    ----------
    policy
        A name from :data:`whale_opt.registry.REGISTRY` (``"wspt"``, ``"cpsat"``...);
        a policy object given to :func:`~whale_opt.sim.simulate` decides instead.
    preset
        CP-SAT parameter preset (``solvers/<name>.toml``); ignored by heuristics.
    time_limit_s
        Seconds per round; overrides the cluster's ``policy.time_limit_s``.
    round_period_s
        A round every this many simulated seconds (None: no periodic rounds).
        A periodic round with nothing changed since the last round is skipped:
        the state it would see is the one the last round already decided on.
    round_on_events
        A round after every arrival, completion, failure or repair.
    round_batch_s
        Event rounds wait this long, gathering the events that fall in between
        into one round (0: a round at the event's own second).
    seed
        Seeds the duration noise, the failure model and the CP-SAT solver.
    duration_noise_sigma
        Sigma of the log-normal ratio actual / estimated duration, drawn per
        job when the trace gives only one of the two (0: they are equal).
    checkpoint_interval_s
        Jobs checkpoint every this many seconds of computing (after the
        restore a restarted attempt begins with); a failure or a preemption
        loses the work since the last checkpoint (None: no checkpoints, an
        interruption loses the whole attempt), and the restart first spends
        the job's ``checkpoint_s`` restoring. The scheduler assumes the same
        interval, so each round prices a preemption at what it really costs.
    mtbf_node_s, repair_s
        Seeded failure model: each healthy node fails after an exponential
        time of mean ``mtbf_node_s`` and comes back ``repair_s`` later.
    outages
        An explicit failure (and drain) trace instead of (or on top of) the
        MTBF model.
    end_s, max_rounds
        Stop at this simulated time / after this many rounds (None: when
        every job is done, or nothing more can happen).
    check_decisions
        Run the public checker on every round's decision against the snapshot
        it was made on; a violation raises :class:`DecisionError`. On in tests.
    carry_plan
        Each round's plan is the next round's hint (``Scheduler(carry_plan=...)``;
        off by default, see ``bench/CARRY_PLAN.md``).
    """

    policy: str = "wspt"
    preset: str | None = None
    time_limit_s: float | None = None
    round_period_s: int | None = 300
    round_on_events: bool = True
    round_batch_s: int = 0
    seed: int = 0
    duration_noise_sigma: float = 0.0
    checkpoint_interval_s: int | None = 3600
    mtbf_node_s: float | None = None
    repair_s: int = 3600
    outages: tuple[Outage, ...] = ()
    end_s: int | None = None
    max_rounds: int | None = None
    check_decisions: bool = False
    carry_plan: bool = False

    def __post_init__(self) -> None:
        from whale_opt.registry import REGISTRY  # the registry may grow at import time

        _require(
            self.policy in REGISTRY,
            "policy",
            self.policy,
            f"is not a known policy; choose from {', '.join(sorted(REGISTRY))}",
        )
        _require(
            self.time_limit_s is None
            or (
                isinstance(self.time_limit_s, int | float)
                and math.isfinite(self.time_limit_s)
                and self.time_limit_s > 0
            ),
            "time_limit_s",
            self.time_limit_s,
            "must be a number > 0",
        )
        _optional_positive_int("round_period_s", self.round_period_s)
        _require(
            self.round_period_s is not None or self.round_on_events,
            "round_on_events",
            self.round_on_events,
            "must be on when there is no round_period_s: nothing would ever run a round",
        )
        _require(
            _is_int(self.round_batch_s) and self.round_batch_s >= 0,
            "round_batch_s",
            self.round_batch_s,
            "must be an int >= 0",
        )
        _require(
            isinstance(self.carry_plan, bool),
            "carry_plan",
            self.carry_plan,
            "must be true or false",
        )
        _require(_is_int(self.seed), "seed", self.seed, "must be an integer")
        _require(
            isinstance(self.duration_noise_sigma, int | float)
            and math.isfinite(self.duration_noise_sigma)
            and 0 <= self.duration_noise_sigma <= 5,
            "duration_noise_sigma",
            self.duration_noise_sigma,
            "must be a number in [0, 5]",
        )
        _optional_positive_int("checkpoint_interval_s", self.checkpoint_interval_s)
        _require(
            self.mtbf_node_s is None
            or (isinstance(self.mtbf_node_s, int | float) and self.mtbf_node_s > 0),
            "mtbf_node_s",
            self.mtbf_node_s,
            "must be a number > 0",
        )
        _require(
            _is_int(self.repair_s) and self.repair_s >= 1,
            "repair_s",
            self.repair_s,
            "must be an int >= 1",
        )
        for k, outage in enumerate(self.outages):
            _require(isinstance(outage, Outage), f"outages[{k}]", outage, "must be an Outage")
        _require(
            self.end_s is None or (_is_int(self.end_s) and self.end_s >= 0),
            "end_s",
            self.end_s,
            "must be an int >= 0",
        )
        _optional_positive_int("max_rounds", self.max_rounds)
