"""The records of one round: GPU types, nodes, running and queued jobs,
priority classes, tenants and the policy, with the defaults they fall back on.

Every record checks itself on construction (:mod:`whale_opt.problem_data.fields`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from whale_opt.problem_data.fields import (
    FROM_POLICY,
    _ident,
    _integer,
    _max_wait,
    _nonneg,
    _pairs,
    _positive,
    _require,
    _sequence,
)

NVLINK_LAYOUTS = ("nvswitch", "hybrid-cube-mesh", "pairs", "pcie")
TOPOLOGIES = ("nvlink", "node", "rack", "any")
DEFAULT_HORIZON_S = 604_800
DEFAULT_CLASS = "training"
# Defaults of the wait ceiling and aging where a file or caller is silent; the
# README's "Wait ceiling and aging" gives the reasoning.
DEFAULT_MAX_WAIT_S = 86_400  # 24 h
DEFAULT_BEST_EFFORT_MAX_WAIT_S = 259_200  # 72 h
DEFAULT_AGING_PER_HOUR = 0.05  # weight x 2.2 after 24 h
# A GPU is 1000 milli-GPUs; a job asking fewer shares its one GPU with others.
MILLI = 1000


@dataclass(frozen=True)
class GpuType:
    """A GPU model: memory in GB and speed relative to a 1.0 reference GPU."""

    name: str
    memory_gb: float
    speed: float = 1.0

    def __post_init__(self) -> None:
        _ident("name", self.name)
        _positive("memory_gb", self.memory_gb)
        _positive("speed", self.speed)


@dataclass(frozen=True)
class Node:
    """A server: one GPU type, its NVLink layout, CPU, host memory and health.

    ``nvlink`` is a named layout or a tuple of NVLink-linked index pairs. A
    ``draining`` node keeps its running jobs but takes no new work.
    """

    id: str
    gpu_type: str
    gpu_count: int
    nvlink: str | tuple[tuple[int, int], ...] = "pcie"
    cpu: float = 0.0
    memory_gb: float = 0.0
    rack: str = "default"
    zone: str | None = None
    down: bool = False
    failed_gpus: tuple[int, ...] = ()
    draining: bool = False

    def __post_init__(self) -> None:
        # Lists (what a caller or a JSON reader has) become tuples: records hash.
        object.__setattr__(self, "failed_gpus", _sequence("failed_gpus", self.failed_gpus))
        if not isinstance(self.nvlink, str):
            edges = _sequence("nvlink.edges", self.nvlink)
            edges = tuple(_sequence(f"nvlink.edges[{k}]", e) for k, e in enumerate(edges))
            object.__setattr__(self, "nvlink", edges)
        _ident("id", self.id)
        _require("/" not in self.id, "id", self.id, "must not contain '/'")
        _ident("gpu_type", self.gpu_type)
        _integer("gpus", self.gpu_count, 1)
        _nonneg("cpu", self.cpu)
        _nonneg("memory_gb", self.memory_gb)
        _ident("rack", self.rack)
        if isinstance(self.nvlink, str):
            _require(
                self.nvlink in NVLINK_LAYOUTS,
                "nvlink",
                self.nvlink,
                f"must be one of {', '.join(NVLINK_LAYOUTS)} or {{'edges': [...]}}",
            )
            _require(
                self.nvlink != "hybrid-cube-mesh" or self.gpu_count == 8,
                "nvlink",
                self.nvlink,
                "hybrid-cube-mesh needs exactly 8 GPUs",
            )
        else:
            for k, edge in enumerate(self.nvlink):
                _require(
                    len(edge) == 2
                    and all(isinstance(i, int) and 0 <= i < self.gpu_count for i in edge)
                    and edge[0] != edge[1],
                    f"nvlink.edges[{k}]",
                    list(edge),
                    f"must link two different GPU indices in 0..{self.gpu_count - 1}",
                )
        for k, index in enumerate(self.failed_gpus):
            _require(
                isinstance(index, int) and 0 <= index < self.gpu_count,
                f"failed_gpus[{k}]",
                index,
                f"must be a GPU index in 0..{self.gpu_count - 1}",
            )
        _require(
            len(set(self.failed_gpus)) == len(self.failed_gpus),
            "failed_gpus",
            list(self.failed_gpus),
            "lists a GPU twice",
        )

    def gpu_id(self, index: int) -> str:
        """The public id ``"<node>/<index>"`` of GPU ``index``."""
        return f"{self.id}/{index}"

    @property
    def healthy_indices(self) -> tuple[int, ...]:
        """Indices of GPUs that may run work (none when the node is down)."""
        if self.down:
            return ()
        failed = set(self.failed_gpus)
        return tuple(i for i in range(self.gpu_count) if i not in failed)


@dataclass(frozen=True)
class RunningJob:
    """A job holding GPUs now; ``remaining_s`` counts from the instance's now.

    ``checkpoint_s`` is the checkpoint/restore time a preemption costs;
    ``since_checkpoint_s`` the work done since its last checkpoint, lost if
    it is preempted (None: unknown, so all work since ``started_at``).
    """

    id: str
    gpu_ids: tuple[str, ...]
    remaining_s: int
    tenant: str = "default"
    cpu: float = 0.0
    memory_gb: float = 0.0
    started_at: int = 0
    weight: float = 1.0
    preemptible: bool = True
    checkpoint_s: int = 0
    priority_class: str = DEFAULT_CLASS
    since_checkpoint_s: int | None = None
    gpu_milli: int = MILLI
    node: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_ids", _sequence("gpus", self.gpu_ids))
        _ident("id", self.id)
        _ident("tenant", self.tenant)
        _seconds_at("started_at", self.started_at)
        _require(
            len(self.gpu_ids) >= 1 or self.node is not None,
            "gpus",
            list(self.gpu_ids),
            "must hold at least one GPU (a CPU-only job names its node instead)",
        )
        _require(
            not (self.gpu_ids and self.node is not None),
            "node",
            self.node,
            "is only for a CPU-only job (gpus: []); a GPU job's node is in its GPU ids",
        )
        if self.node is not None:
            _ident("node", self.node)
        _milli(self.gpu_milli, len(self.gpu_ids))
        _require(
            len(set(self.gpu_ids)) == len(self.gpu_ids),
            "gpus",
            list(self.gpu_ids),
            "lists a GPU twice",
        )
        _require(
            isinstance(self.remaining_s, int) and self.remaining_s >= 1,
            "remaining_s",
            self.remaining_s,
            "must be an integer >= 1",
        )
        _nonneg("cpu", self.cpu)
        _nonneg("memory_gb", self.memory_gb)
        _positive("weight", self.weight)
        _require(
            isinstance(self.checkpoint_s, int) and self.checkpoint_s >= 0,
            "checkpoint_s",
            self.checkpoint_s,
            "must be an integer >= 0",
        )
        _ident("priority_class", self.priority_class)
        _integer("since_checkpoint_s", self.since_checkpoint_s, 0, optional=True)

        _require(
            self.since_checkpoint_s is None or self.since_checkpoint_s <= max(0, -self.started_at),
            "since_checkpoint_s",
            self.since_checkpoint_s,
            f"cannot exceed the time the job has run ({max(0, -self.started_at)} s since"
            " started_at)",
        )

    @property
    def shares(self) -> bool:
        """Whether the job holds a share of one GPU, not whole GPUs."""
        return self.gpu_milli < MILLI

    @property
    def gpu_amount(self) -> float:
        """GPUs the job holds, a share counting as its fraction (quotas count this)."""
        return len(self.gpu_ids) * self.gpu_milli / MILLI

    @property
    def lost_on_preempt_s(self) -> int:
        """Work (seconds) a preemption now throws away: since the last checkpoint."""
        if self.since_checkpoint_s is not None:
            return self.since_checkpoint_s
        return max(0, -self.started_at)


@dataclass(frozen=True)
class QueuedJob:
    """A job waiting to start: a gang of ``gpus`` GPUs, all at once or none.

    ``gpu_milli`` below 1000 asks for that share of one GPU (``gpus`` = 1),
    which other shares may use too; ``gpus`` = 0 is a CPU-only job (CPU and
    memory on one node).

    ``duration_s`` is the run time on a GPU of speed 1.0;
    ``duration_by_type_s`` (type, seconds) pairs override it per GPU type.
    ``attained_gpu_s`` is the GPU-seconds of service it already had before
    being requeued (least-attained-service policies rank by it).

    Soft preferences, priced by the policy when dropped: ``zone``,
    ``preferred_gpu_types`` and ``prefer_nvlink`` (an NVLink-connected
    placement wanted but not required: ``topology`` says what is required).
    """

    id: str
    gpu_count: int
    duration_s: int | None = None
    tenant: str = "default"
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: float = 0.0
    cpu: float = 0.0
    memory_gb: float = 0.0
    weight: float = 1.0
    submitted_at: int = 0
    topology: str = "nvlink"
    preemptible: bool = True
    zone: str | None = None
    duration_by_type_s: tuple[tuple[str, int], ...] = ()
    attained_gpu_s: float = 0.0
    priority_class: str = DEFAULT_CLASS
    preferred_gpu_types: tuple[str, ...] = ()
    prefer_nvlink: bool = False
    gpu_milli: int = MILLI

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", _sequence("gpu_types", self.gpu_types))
        preferred = _sequence("preferred_gpu_types", self.preferred_gpu_types)
        object.__setattr__(self, "preferred_gpu_types", preferred)
        by_type = _pairs(
            "duration_by_type_s", self.duration_by_type_s, "must map GPU types to seconds"
        )
        object.__setattr__(self, "duration_by_type_s", by_type)
        _ident("id", self.id)
        _ident("tenant", self.tenant)
        _seconds_at("submitted_at", self.submitted_at)
        _integer("gpus", self.gpu_count, 0)
        _milli(self.gpu_milli, self.gpu_count)
        _require(
            self.duration_s is not None or len(self.duration_by_type_s) > 0,
            "duration_s",
            self.duration_s,
            "is required unless duration_by_type_s is given",
        )
        if self.duration_s is not None:
            _require(
                isinstance(self.duration_s, int) and self.duration_s >= 1,
                "duration_s",
                self.duration_s,
                "must be an integer >= 1",
            )
        for name, seconds in self.duration_by_type_s:
            _require(
                isinstance(seconds, int) and seconds >= 1,
                f"duration_by_type_s.{name}",
                seconds,
                "must be an integer >= 1",
            )
        _nonneg("min_gpu_memory_gb", self.min_gpu_memory_gb)
        _nonneg("attained_gpu_s", self.attained_gpu_s)
        _nonneg("cpu", self.cpu)
        _nonneg("memory_gb", self.memory_gb)
        _positive("weight", self.weight)
        _require(
            self.topology in TOPOLOGIES,
            "topology",
            self.topology,
            f"must be one of {', '.join(TOPOLOGIES)}",
        )
        _ident("priority_class", self.priority_class)

    @property
    def shares(self) -> bool:
        """Whether the job asks for a share of one GPU, not whole GPUs."""
        return self.gpu_milli < MILLI

    @property
    def cpu_only(self) -> bool:
        """Whether the job uses no GPU at all (``gpus`` = 0)."""
        return self.gpu_count == 0

    @property
    def gpu_amount(self) -> float:
        """GPUs the job asks for, a share counting as its fraction (quotas count this)."""
        return self.gpu_count * self.gpu_milli / MILLI


def _seconds_at(path: str, value: object) -> None:
    """A moment in integer seconds (relative to the round's now: may be negative)."""
    _require(
        isinstance(value, int) and not isinstance(value, bool),
        path,
        value,
        "must be an integer (seconds)",
    )


def _milli(milli: int, gpus: int) -> None:
    """``gpu_milli``: an integer 1..1000, below 1000 only on exactly one GPU."""
    _integer("gpu_milli", milli, 1)
    _require(milli <= MILLI, "gpu_milli", milli, f"must be at most {MILLI} (one whole GPU)")
    _require(
        milli == MILLI or gpus == 1,
        "gpu_milli",
        milli,
        f"a share below {MILLI} is of one GPU: gpus must be 1, got {gpus}",
    )


@dataclass(frozen=True)
class PriorityClass:
    """A priority class: a weight factor, a rank, a wait ceiling, and whether it
    may be preempted.

    A job's weight in the objective is its own weight times its class's
    ``weight``; heuristics start higher ``rank`` first, and a running job may
    be preempted for a job of a higher rank only (or to reclaim a guarantee).

    ``max_wait_s`` is the class's wait ceiling: a job of the class that has
    waited longer is overdue and goes ahead of every job that is not, across
    classes (:attr:`Instance.overdue`). ``"policy"`` (the default) takes
    :attr:`Policy.max_wait_s`; None means no ceiling for the class. The
    ceiling belongs to the class, as its weight and rank do, so an operator's
    own classes get theirs the same way; the built-in ``best-effort`` class
    has its own, longer one.
    """

    name: str
    weight: float = 1.0
    rank: int = 0
    preemptible: bool = True
    max_wait_s: int | Literal["policy"] | None = FROM_POLICY

    def __post_init__(self) -> None:
        _ident("name", self.name)
        _positive("weight", self.weight)
        _require(
            isinstance(self.rank, int) and not isinstance(self.rank, bool),
            "rank",
            self.rank,
            "must be an integer",
        )
        _max_wait("max_wait_s", self.max_wait_s, from_policy=True)


DEFAULT_PRIORITY_CLASSES: Mapping[str, PriorityClass] = MappingProxyType(
    {
        "online": PriorityClass("online", weight=10.0, rank=2, preemptible=False),
        DEFAULT_CLASS: PriorityClass(DEFAULT_CLASS, weight=1.0, rank=1, preemptible=True),
        "best-effort": PriorityClass(
            "best-effort",
            weight=0.1,
            rank=0,
            preemptible=True,
            max_wait_s=DEFAULT_BEST_EFFORT_MAX_WAIT_S,
        ),
    }
)


@dataclass(frozen=True)
class Tenant:
    """A tenant; ``gpu_quota`` caps the GPUs it holds at once (None: no cap).

    ``guaranteed_gpus`` is its guaranteed share: GPUs it holds beyond it are
    borrowed, and may be reclaimed by preemption for a tenant below its own
    guarantee (None: no guarantee, everything it holds is borrowed).
    """

    name: str
    gpu_quota: int | None = None
    guaranteed_gpus: int | None = None

    def __post_init__(self) -> None:
        _ident("name", self.name)
        if self.gpu_quota is not None:
            _require(
                isinstance(self.gpu_quota, int) and self.gpu_quota >= 0,
                "gpu_quota",
                self.gpu_quota,
                "must be an integer >= 0",
            )
        if self.guaranteed_gpus is not None:
            _require(
                isinstance(self.guaranteed_gpus, int) and self.guaranteed_gpus >= 0,
                "guaranteed_gpus",
                self.guaranteed_gpus,
                "must be an integer >= 0",
            )
            _require(
                self.gpu_quota is None or self.guaranteed_gpus <= self.gpu_quota,
                "guaranteed_gpus",
                self.guaranteed_gpus,
                f"must not exceed gpu_quota ({self.gpu_quota})",
            )


@dataclass(frozen=True)
class Policy:
    """Round parameters.

    ``zone_penalty_s`` is the price, in weighted seconds per unit of weight,
    of placing a job outside its preferred zone; ``allow_preemption`` lets a
    decision preempt preemptible running jobs (off: every running job keeps
    its GPUs). Run settings (time limit, seed, bound) are not here: see
    :class:`whale_opt.options.SolveOptions`.

    ``gpu_type_penalty_s`` and ``nvlink_penalty_s`` price, like the zone,
    a job placed off its ``preferred_gpu_types`` or, with ``prefer_nvlink``,
    on GPUs that are not NVLink-connected. ``aging_per_hour`` grows a waiting
    job's weight by that fraction per hour waited (0: no aging).
    ``min_run_s`` is how long a job must have run before it may be
    preempted; ``max_preemptions`` caps the preemptions of one round.

    ``max_wait_s`` is the wait ceiling of every priority class that does not
    set its own (:attr:`PriorityClass.max_wait_s`; None: no ceiling): a job
    that has waited longer is overdue and goes ahead of every job that is
    not (:attr:`Instance.overdue`). Aging and the ceiling are on by default
    (0.05 per hour, 24 h): the README's "Wait ceiling and aging" says why.

    ``gpu_second_prices`` charges each GPU-second a placement takes on a GPU
    type, in weighted seconds (a price of 1: a GPU-hour there costs what an
    hour's delay of a weight-1 job costs; unpriced types cost nothing). It
    is what keeps a scarce type for the work that needs it: a round sees only
    the queue it has, not the arrivals that will want the type while a job
    holds it. Given as a mapping; held as sorted (type, price) pairs.
    """

    horizon_s: int = DEFAULT_HORIZON_S
    zone_penalty_s: int = 3600
    allow_preemption: bool = False
    gpu_type_penalty_s: int = 3600
    nvlink_penalty_s: int = 3600
    aging_per_hour: float = DEFAULT_AGING_PER_HOUR
    min_run_s: int = 0
    max_preemptions: int | None = None
    max_wait_s: int | None = DEFAULT_MAX_WAIT_S
    gpu_second_prices: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        items = _pairs("gpu_second_prices", self.gpu_second_prices, "must map GPU types to prices")
        for item in items:
            path = f"gpu_second_prices.{item[0]}"
            _require(not isinstance(item[1], bool), path, item[1], "must be a number >= 0")
            _nonneg(path, item[1])
        names = [item[0] for item in items]
        for name in names:
            _require(names.count(name) == 1, f"gpu_second_prices.{name}", name, "priced twice")
        object.__setattr__(self, "gpu_second_prices", tuple(sorted(items)))
        _require(
            isinstance(self.horizon_s, int) and self.horizon_s >= 1,
            "horizon_s",
            self.horizon_s,
            "must be an integer >= 1",
        )
        for name in ("zone_penalty_s", "gpu_type_penalty_s", "nvlink_penalty_s", "min_run_s"):
            _integer(name, getattr(self, name), 0)
        _nonneg("aging_per_hour", self.aging_per_hour)
        _integer("max_preemptions", self.max_preemptions, 0, optional=True)
        _max_wait("max_wait_s", self.max_wait_s)

    @property
    def priced(self) -> bool:
        """Whether some GPU type has a GPU-second price above 0."""
        return any(price > 0 for _, price in self.gpu_second_prices)

    def for_types(self, names: Collection[str]) -> Policy:
        """This policy with only the GPU-second prices of the types ``names`` (a
        sub-instance that has fewer types)."""
        kept = tuple(pair for pair in self.gpu_second_prices if pair[0] in names)
        return self if kept == self.gpu_second_prices else replace(self, gpu_second_prices=kept)

    def gpu_second_price(self, gpu_type: str) -> float:
        """The price of one GPU-second on ``gpu_type`` (0: unpriced)."""
        for name, value in self.gpu_second_prices:
            if name == gpu_type:
                return float(value)
        return 0.0


@dataclass(frozen=True)
class GpuRef:
    """Where a GPU id points: node position in ``Instance.nodes`` and index."""

    node: int
    index: int
