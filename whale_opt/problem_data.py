"""Immutable, validated records of one scheduling round, and their container.

Every record checks itself on construction and raises :class:`FieldError`
naming the field and the bad value; :class:`Instance` checks every
cross-reference once and precomputes the maps the solvers need, so solver
code never re-checks. Nothing here imports the rest of the package.
"""

from __future__ import annotations

import copyreg
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal


# Records freeze their maps as MappingProxyType; this makes them picklable (pools
# travel to worker processes as they are, with no JSON round trip).
def _frozen_map(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda proxy: (_frozen_map, (dict(proxy),)))

NVLINK_LAYOUTS = ("nvswitch", "hybrid-cube-mesh", "pairs", "pcie")
TOPOLOGIES = ("nvlink", "node", "rack", "any")
DEFAULT_HORIZON_S = 604_800
DEFAULT_CLASS = "training"
# Defaults of the wait ceiling and aging where a file or caller is silent; the
# README's "Wait ceiling and aging" gives the reasoning.
DEFAULT_MAX_WAIT_S = 86_400  # 24 h
DEFAULT_BEST_EFFORT_MAX_WAIT_S = 259_200  # 72 h
DEFAULT_AGING_PER_HOUR = 0.05  # weight x 2.2 after 24 h
FROM_POLICY: Literal["policy"] = "policy"
"""A :class:`PriorityClass` whose ``max_wait_s`` is this takes :attr:`Policy.max_wait_s`."""
OVERDUE_LIFT = 2.0
"""An overdue job's Smith ratio is lifted to this many times the largest ratio
of any job not overdue (see :attr:`Instance.weights`)."""


class FieldError(ValueError):
    """A record field holds a bad value.

    ``path`` is a JSON-path-like location (``nodes[3].gpus``) that callers
    extend as the error travels outwards; ``value`` is the offending value.
    """

    def __init__(self, path: str, value: Any, message: str) -> None:
        self.path = path
        self.value = value
        self.message = message
        super().__init__(self.__str__())

    def within(self, prefix: str) -> FieldError:
        """Return the same error located under ``prefix``."""
        path = (
            f"{prefix}.{self.path}"
            if self.path and not self.path.startswith("[")
            else (f"{prefix}{self.path}")
        )
        return FieldError(path, self.value, self.message)

    def __str__(self) -> str:
        return f"{self.path}: {self.message} (got {self.value!r})"


def _require(ok: bool, path: str, value: Any, message: str) -> None:
    if not ok:
        raise FieldError(path, value, message)


def _nonneg(path: str, value: float) -> None:
    _require(
        isinstance(value, int | float) and math.isfinite(value) and value >= 0,
        path,
        value,
        "must be a number >= 0",
    )


def _positive(path: str, value: float) -> None:
    _require(
        isinstance(value, int | float) and math.isfinite(value) and value > 0,
        path,
        value,
        "must be a number > 0",
    )


def _integer(path: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    """An integer (not a bool) >= ``minimum``; None too when ``optional``."""
    if optional and value is None:
        return
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        path,
        value,
        f"must be an integer >= {minimum}",
    )


def _max_wait(path: str, value: Any, *, from_policy: bool = False) -> None:
    """A wait ceiling: an integer >= 1, None (no ceiling), or "policy" where allowed."""
    if from_policy and value == FROM_POLICY:
        return
    also = ', or "policy"' if from_policy else ""
    _require(
        value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1),
        path,
        value,
        f"must be an integer >= 1 (seconds), null (no ceiling){also}",
    )


def _ident(path: str, value: Any) -> None:
    _require(isinstance(value, str) and value != "", path, value, "must be a non-empty string")


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
            for k, (a, b) in enumerate(self.nvlink):
                _require(
                    0 <= a < self.gpu_count and 0 <= b < self.gpu_count and a != b,
                    f"nvlink.edges[{k}]",
                    [a, b],
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

    def __post_init__(self) -> None:
        _ident("id", self.id)
        _ident("tenant", self.tenant)
        _require(len(self.gpu_ids) >= 1, "gpus", list(self.gpu_ids), "must hold at least one GPU")
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
    def lost_on_preempt_s(self) -> int:
        """Work (seconds) a preemption now throws away: since the last checkpoint."""
        if self.since_checkpoint_s is not None:
            return self.since_checkpoint_s
        return max(0, -self.started_at)


@dataclass(frozen=True)
class QueuedJob:
    """A job waiting to start: a gang of ``gpus`` GPUs, all at once or none.

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

    def __post_init__(self) -> None:
        _ident("id", self.id)
        _ident("tenant", self.tenant)
        _integer("gpus", self.gpu_count, 1)
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

    def __post_init__(self) -> None:
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


@dataclass(frozen=True)
class GpuRef:
    """Where a GPU id points: node position in ``Instance.nodes`` and index."""

    node: int
    index: int


@dataclass(frozen=True)
class Instance:
    """One round: the cluster, what runs on it, the queue, tenants and policy.

    Construction checks every cross-reference (unknown GPU types, duplicate
    ids, GPU ids out of range or held twice) and precomputes, per queued job,
    the GPU types it may use and its duration on each, whether it is overdue
    and its effective weight.

    ``overdue[k]``: queued job ``k`` has waited (``-submitted_at``) longer
    than its ceiling (:meth:`max_wait`). Every order-based policy puts
    overdue jobs first, across classes, in the order they passed their
    ceilings (:func:`whale_opt.policies.ordered.ranked`).

    ``weights[k]``: its weight x its class's factor x (1 + ``aging_per_hour``
    x hours waited); an overdue job's is then raised, where it is lower, to
    :data:`OVERDUE_LIFT` x the largest Smith ratio (effective weight / (GPUs x
    shortest duration)) of the jobs not overdue, times its own GPUs x
    shortest duration. Its ratio then exceeds every other job's, so the
    objective CP-SAT minimises ranks it first as the order rule does. The
    decision's objective and bound are computed with these weights too, so
    an overdue job weighs more there than its aged weight.
    """

    name: str
    gpu_types: Mapping[str, GpuType]
    nodes: tuple[Node, ...]
    running: tuple[RunningJob, ...] = ()
    queue: tuple[QueuedJob, ...] = ()
    tenants: Mapping[str, Tenant] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    now: int = 0
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    # Derived maps, filled in __post_init__.
    node_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    gpu_owner: Mapping[str, str] = field(init=False, repr=False, compare=False)
    eligible_types: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    durations: tuple[Mapping[str, int], ...] = field(init=False, repr=False, compare=False)
    overdue: tuple[bool, ...] = field(init=False, repr=False, compare=False)
    weights: tuple[float, ...] = field(init=False, repr=False, compare=False)
    running_weights: tuple[float, ...] = field(init=False, repr=False, compare=False)
    queue_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    running_index: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _ident("name", self.name)
        object.__setattr__(self, "gpu_types", MappingProxyType(dict(self.gpu_types)))
        # Classes given override the defaults of the same name; the others stay.
        classes = {**DEFAULT_PRIORITY_CLASSES, **self.priority_classes}
        object.__setattr__(self, "priority_classes", MappingProxyType(classes))
        for key, klass in self.priority_classes.items():
            _require(key == klass.name, f"priority_classes.{key}", klass.name, "name mismatch")
        object.__setattr__(self, "tenants", MappingProxyType(dict(self.tenants)))
        for key, gpu_type in self.gpu_types.items():
            _require(key == gpu_type.name, f"gpu_types.{key}", gpu_type.name, "name mismatch")
        node_index: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            _require(node.id not in node_index, f"nodes[{k}].id", node.id, "duplicate node id")
            _require(
                node.gpu_type in self.gpu_types,
                f"nodes[{k}].gpu_type",
                node.gpu_type,
                "is not in gpu_types",
            )
            node_index[node.id] = k
        object.__setattr__(self, "node_index", MappingProxyType(node_index))
        object.__setattr__(self, "gpu_owner", MappingProxyType(self._check_running()))
        object.__setattr__(
            self, "running_index", MappingProxyType({j.id: k for k, j in enumerate(self.running)})
        )
        object.__setattr__(
            self, "queue_index", MappingProxyType({j.id: k for k, j in enumerate(self.queue)})
        )
        self._check_queue()
        object.__setattr__(
            self, "overdue", tuple(self._past_ceiling(k) for k in range(len(self.queue)))
        )
        object.__setattr__(self, "weights", self._lift_overdue())
        object.__setattr__(
            self,
            "running_weights",
            tuple(
                job.weight * self.priority_classes[job.priority_class].weight
                for job in self.running
            ),
        )

    def _effective_weight(self, job: QueuedJob) -> float:
        """Weight x class factor x (1 + aging_per_hour x hours waited)."""
        waited_h = waited_s(job) / 3600
        factor = self.priority_classes[job.priority_class].weight
        return job.weight * factor * (1.0 + self.policy.aging_per_hour * waited_h)

    def _past_ceiling(self, position: int) -> bool:
        """Whether queued job ``position`` has waited longer than its ceiling."""
        at = self.ceiling_at(position)
        return at is not None and at < 0

    def _lift_overdue(self) -> tuple[float, ...]:
        """Effective weights, overdue jobs' raised to dominate (see the class docstring)."""
        weights = [self._effective_weight(job) for job in self.queue]
        area = [
            None if (shortest := self.min_duration(k)) is None else job.gpu_count * shortest
            for k, job in enumerate(self.queue)
        ]
        largest = max(
            (
                weights[k] / size
                for k, size in enumerate(area)
                if size is not None and not self.overdue[k]
            ),
            default=0.0,
        )
        for k, size in enumerate(area):
            if self.overdue[k] and size is not None:
                weights[k] = max(weights[k], OVERDUE_LIFT * largest * size)
        return tuple(weights)

    def _check_class(self, path: str, name: str) -> None:
        _require(
            name in self.priority_classes,
            path,
            name,
            f"is not a priority class ({', '.join(sorted(self.priority_classes))})",
        )

    def _check_running(self) -> dict[str, str]:
        owner: dict[str, str] = {}
        seen: set[str] = set()
        for k, job in enumerate(self.running):
            _require(job.id not in seen, f"running[{k}].id", job.id, "duplicate job id")
            seen.add(job.id)
            for g, gpu in enumerate(job.gpu_ids):
                path = f"running[{k}].gpus[{g}]"
                ref = self.parse_gpu(gpu, path)
                node = self.nodes[ref.node]
                _require(
                    not node.down and ref.index not in node.failed_gpus,
                    path,
                    gpu,
                    "is on failed hardware: report the job as lost, not running",
                )
                _require(gpu not in owner, path, gpu, f"is already held by {owner.get(gpu)}")
                owner[gpu] = job.id
            self._check_class(f"running[{k}].priority_class", job.priority_class)
        return owner

    def _check_queue(self) -> None:
        seen = {job.id for job in self.running}
        eligible: list[tuple[str, ...]] = []
        durations: list[Mapping[str, int]] = []
        for k, job in enumerate(self.queue):
            _require(job.id not in seen, f"queue[{k}].id", job.id, "duplicate job id")
            seen.add(job.id)
            for t, name in enumerate(job.gpu_types):
                _require(
                    name in self.gpu_types,
                    f"queue[{k}].gpu_types[{t}]",
                    name,
                    "is not in gpu_types (a typo?)",
                )
            self._check_class(f"queue[{k}].priority_class", job.priority_class)
            for t, name in enumerate(job.preferred_gpu_types):
                _require(
                    name in self.gpu_types,
                    f"queue[{k}].preferred_gpu_types[{t}]",
                    name,
                    "is not in gpu_types (a typo?)",
                )
            for name, _ in job.duration_by_type_s:
                _require(
                    name in self.gpu_types,
                    f"queue[{k}].duration_by_type_s",
                    name,
                    "is not in gpu_types (a typo?)",
                )
            allowed = job.gpu_types or tuple(self.gpu_types)
            by_type = dict(job.duration_by_type_s)
            types: list[str] = []
            job_durations: dict[str, int] = {}
            for name in allowed:
                gpu_type = self.gpu_types[name]
                if gpu_type.memory_gb < job.min_gpu_memory_gb:
                    continue
                if name in by_type:
                    job_durations[name] = by_type[name]
                elif job.duration_s is not None:
                    job_durations[name] = math.ceil(job.duration_s / gpu_type.speed)
                else:
                    continue  # no duration known on this type: not eligible
                types.append(name)
            eligible.append(tuple(types))
            durations.append(MappingProxyType(job_durations))
        object.__setattr__(self, "eligible_types", tuple(eligible))
        object.__setattr__(self, "durations", tuple(durations))

    # -- lookups -------------------------------------------------------------

    def parse_gpu(self, gpu: str, path: str = "gpu") -> GpuRef:
        """Resolve ``"<node>/<index>"``; raise :class:`FieldError` if it names nothing."""
        node_id, sep, index_text = gpu.rpartition("/") if isinstance(gpu, str) else ("", "", "")
        _require(bool(sep) and index_text.isdigit(), path, gpu, "must look like '<node>/<index>'")
        _require(node_id in self.node_index, path, gpu, f"names unknown node {node_id!r}")
        node_pos = self.node_index[node_id]
        index = int(index_text)
        _require(
            index < self.nodes[node_pos].gpu_count,
            path,
            gpu,
            f"index out of range (node {node_id} has {self.nodes[node_pos].gpu_count} GPUs)",
        )
        return GpuRef(node_pos, index)

    def queue_position(self, job_id: str) -> int:
        """Position of a queued job in ``queue`` (KeyError when it is not queued)."""
        return self.queue_index[job_id]

    def max_wait(self, job: QueuedJob | RunningJob) -> int | None:
        """The wait ceiling of ``job``'s class: its own, else the policy's (None: none)."""
        own = self.priority_classes[job.priority_class].max_wait_s
        return self.policy.max_wait_s if isinstance(own, str) else own

    def ceiling_at(self, position: int) -> int | None:
        """When queued job ``position`` reaches its ceiling, in seconds from now
        (negative: passed it that long ago); None when its class has none."""
        ceiling = self.max_wait(self.queue[position])
        return None if ceiling is None else self.queue[position].submitted_at + ceiling

    def min_duration(self, position: int) -> int | None:
        """Shortest duration of queued job ``position`` over its eligible types."""
        values = self.durations[position].values()
        return min(values) if values else None

    def deferred_cost_end(self, position: int) -> int:
        """The end time a deferred job is priced at: horizon + its shortest duration."""
        shortest = self.min_duration(position)
        if shortest is None:
            job = self.queue[position]
            shortest = (
                job.duration_s
                if job.duration_s is not None
                else min(s for _, s in job.duration_by_type_s)
            )
        return self.policy.horizon_s + shortest

    def replace(self, **changes: Any) -> Instance:
        """A copy with ``changes`` applied, validated again."""
        return replace(self, **changes)


def tenant_quota(instance: Instance, tenant: str) -> int | None:
    """The GPU quota of ``tenant`` (None when it has none)."""
    record = instance.tenants.get(tenant)
    return None if record is None else record.gpu_quota


def tenant_guarantee(instance: Instance, tenant: str) -> int:
    """The GPUs guaranteed to ``tenant`` (0 when it has no guarantee)."""
    record = instance.tenants.get(tenant)
    return 0 if record is None or record.guaranteed_gpus is None else record.guaranteed_gpus


def waited_s(job: QueuedJob) -> int:
    """Seconds ``job`` has waited by the round's now (0 for a future submit time)."""
    return max(0, -job.submitted_at)


def class_rank(instance: Instance, job: QueuedJob | RunningJob) -> int:
    """The rank of ``job``'s priority class (higher starts first)."""
    return instance.priority_classes[job.priority_class].rank
