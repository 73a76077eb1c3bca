"""The Instance: one round's records, cross-checked, with the maps solvers need.

Also the small lookups on it every layer shares (a tenant's quota and
guarantee, a job's wait and class rank).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from whale_opt.memo import MEMO_SIZE, IdentityMemo
from whale_opt.problem_data.fields import _ident, _require, _sequence
from whale_opt.problem_data.records import (
    DEFAULT_PRIORITY_CLASSES,
    MILLI,
    GpuRef,
    GpuType,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)

# ``Instance.gpu_owner`` of a GPU that running jobs share.
SHARED = "<shared>"

OVERDUE_LIFT = 2.0
"""An overdue job's Smith ratio is lifted to this many times the largest ratio
of any job not overdue (see :attr:`Instance.weights`)."""


# Rounds of one unchanged cluster share their node tuple: index it once.
_NODE_INDEX: IdentityMemo[tuple[Mapping[str, int], frozenset[str]]] = IdentityMemo(MEMO_SIZE)
# Every GPU of a node tuple by its id ("<node>/<index>"), and the ids of the
# healthy ones: a split round of 4,096 GPUs resolves some 30,000 GPU ids, most
# of them validating instances it derives from one already valid.
_GPU_REFS: IdentityMemo[tuple[Mapping[str, GpuRef], frozenset[str]]] = IdentityMemo(MEMO_SIZE)


def _gpu_refs(nodes: tuple[Node, ...]) -> tuple[Mapping[str, GpuRef], frozenset[str]]:
    refs = {
        f"{node.id}/{index}": GpuRef(k, index)
        for k, node in enumerate(nodes)
        for index in range(node.gpu_count)
    }
    healthy = frozenset(
        gpu
        for gpu, ref in refs.items()
        if not nodes[ref.node].down and ref.index not in nodes[ref.node].failed_gpus
    )
    return refs, healthy


def _hold(
    owner: dict[str, str],
    shared: dict[str, int],
    job: RunningJob,
    gpu: str,
    where: str,
    path: str,
) -> None:
    """Record that ``job`` (at ``where``) holds ``gpu``: whole, when no one else holds
    it, or a share beside other shares adding up to at most one GPU (owner: SHARED)."""
    if not job.shares:
        _require(gpu not in owner, path, gpu, f"is already held by {owner.get(gpu)}")
        owner[gpu] = job.id
        return
    _require(
        owner.get(gpu, SHARED) == SHARED,
        path,
        gpu,
        f"is held whole by {owner.get(gpu)}: no share fits beside it",
    )
    shared[gpu] = shared.get(gpu, 0) + job.gpu_milli
    _require(
        shared[gpu] <= MILLI,
        f"{where}.gpu_milli",
        job.gpu_milli,
        f"shares of GPU {gpu} add up to {shared[gpu]} > {MILLI}",
    )
    owner[gpu] = SHARED


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

    ``lost``: jobs that were running when their hardware failed (a GPU on a
    ``down`` node or in its node's ``failed_gpus``). They are not in
    ``running``, so nothing in the engine sees them: their GPUs on healthy
    hardware are free, and every decision reports each of them ``lost``
    (:func:`whale_opt.decision.lost_decisions`). The file format keeps one
    ``running`` list; the reader splits it (:mod:`whale_opt.io.instance`).
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
    lost: tuple[RunningJob, ...] = ()
    # Derived maps, filled in __post_init__.
    node_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    node_types: frozenset[str] = field(init=False, repr=False, compare=False)
    gpu_owner: Mapping[str, str] = field(init=False, repr=False, compare=False)
    eligible_types: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    durations: tuple[Mapping[str, int], ...] = field(init=False, repr=False, compare=False)
    overdue: tuple[bool, ...] = field(init=False, repr=False, compare=False)
    weights: tuple[float, ...] = field(init=False, repr=False, compare=False)
    running_weights: tuple[float, ...] = field(init=False, repr=False, compare=False)
    queue_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    running_index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _gpus: Mapping[str, GpuRef] = field(init=False, repr=False, compare=False)
    _healthy: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("nodes", "running", "queue", "lost"):  # lists become tuples
            object.__setattr__(self, name, _sequence(name, getattr(self, name)))
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
        node_index, types = _NODE_INDEX.get(self.nodes, self._index_nodes)
        if not types <= self.gpu_types.keys():
            for k, node in enumerate(self.nodes):
                _require(
                    node.gpu_type in self.gpu_types,
                    f"nodes[{k}].gpu_type",
                    node.gpu_type,
                    "is not in gpu_types",
                )
        for name, _ in self.policy.gpu_second_prices:
            _require(
                name in self.gpu_types,
                f"policy.gpu_second_prices.{name}",
                name,
                "is not in gpu_types",
            )
        object.__setattr__(self, "node_index", node_index)
        object.__setattr__(self, "node_types", types)
        self._attach_gpus()
        owner, shared = self._check_running()
        self._check_lost(dict(owner), dict(shared))
        object.__setattr__(self, "gpu_owner", MappingProxyType(owner))
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

    def _index_nodes(self) -> tuple[Mapping[str, int], frozenset[str]]:
        """Node positions by id (ids unique), and the GPU types the nodes have."""
        node_index: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            if node.id in node_index:
                _require(False, f"nodes[{k}].id", node.id, "duplicate node id")
            node_index[node.id] = k
        return MappingProxyType(node_index), frozenset(node.gpu_type for node in self.nodes)

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
        area = [self.gpu_area(k) for k in range(len(self.queue))]
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
        if name in self.priority_classes:
            return
        _require(
            False,
            path,
            name,
            f"is not a priority class ({', '.join(sorted(self.priority_classes))})",
        )

    def _check_running(self) -> tuple[dict[str, str], dict[str, int]]:
        """Unique ids; GPUs that exist, work, and are held whole by one job or
        shared by jobs whose shares add up to at most one GPU (owner: SHARED)."""
        owner: dict[str, str] = {}
        shared: dict[str, int] = {}
        seen: set[str] = set()
        for k, job in enumerate(self.running):
            _require(job.id not in seen, f"running[{k}].id", job.id, "duplicate job id")
            seen.add(job.id)
            if job.node is not None:
                path = f"running[{k}].node"
                _require(job.node in self.node_index, path, job.node, "is not a node")
                _require(
                    not self.nodes[self.node_index[job.node]].down,
                    path,
                    job.node,
                    "is down: a job running there is lost, not running",
                )
            whole = not job.shares
            for g, gpu in enumerate(job.gpu_ids):
                if whole and isinstance(gpu, str) and gpu in self._healthy and gpu not in owner:
                    owner[gpu] = job.id  # the common case, without building messages
                    continue
                path = f"running[{k}].gpus[{g}]"
                ref = self.parse_gpu(gpu, path)
                node = self.nodes[ref.node]
                _require(
                    not node.down and ref.index not in node.failed_gpus,
                    path,
                    gpu,
                    "is on failed hardware: the job is lost (Instance.lost), not running",
                )
                _hold(owner, shared, job, gpu, f"running[{k}]", path)
            self._check_class(f"running[{k}].priority_class", job.priority_class)
        return owner, shared

    def _check_lost(self, owner: dict[str, str], shared: dict[str, int]) -> None:
        """Lost jobs: unique ids, GPUs that exist and no other job holds (shares of one
        GPU, lost together when it fails, as for running ones), and at least one of
        them on failed hardware (else the job is running, not lost)."""
        seen = {job.id for job in self.running}
        for k, job in enumerate(self.lost):
            _require(job.id not in seen, f"lost[{k}].id", job.id, "duplicate job id")
            seen.add(job.id)
            for g, gpu in enumerate(job.gpu_ids):
                path = f"lost[{k}].gpus[{g}]"
                self.parse_gpu(gpu, path)
                _hold(owner, shared, job, gpu, f"lost[{k}]", path)
            _require(
                self.lost_reason(job) is not None,
                f"lost[{k}].gpus",
                list(job.gpu_ids),
                "are all on healthy hardware: the job is running, not lost",
            )
            self._check_class(f"lost[{k}].priority_class", job.priority_class)

    def check_job(self, job: QueuedJob, path: str = "") -> None:
        """That the names ``job`` uses are this cluster's: its GPU types (allowed,
        preferred and timed) and its priority class; ``path`` locates it in errors.

        Raises
        ------
        FieldError
            A name is not the cluster's.
        """
        at = f"{path}." if path else ""
        unknown = f"is not in gpu_types (a typo?); the types are {', '.join(self.gpu_types)}"
        for t, name in enumerate(job.gpu_types):
            _require(name in self.gpu_types, f"{at}gpu_types[{t}]", name, unknown)
        self._check_class(f"{at}priority_class", job.priority_class)
        for t, name in enumerate(job.preferred_gpu_types):
            _require(name in self.gpu_types, f"{at}preferred_gpu_types[{t}]", name, unknown)
        for name, _ in job.duration_by_type_s:
            _require(name in self.gpu_types, f"{at}duration_by_type_s", name, unknown)

    def _check_queue(self) -> None:
        seen = {job.id for job in (*self.running, *self.lost)}
        eligible: list[tuple[str, ...]] = []
        durations: list[Mapping[str, int]] = []
        for k, job in enumerate(self.queue):
            _require(job.id not in seen, f"queue[{k}].id", job.id, "duplicate job id")
            seen.add(job.id)
            self.check_job(job, f"queue[{k}]")
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
                    # A CPU-only job runs as long on any node: GPU speed is not its pace.
                    speed = 1.0 if job.cpu_only else gpu_type.speed
                    job_durations[name] = math.ceil(job.duration_s / speed)
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
        found = self._gpus.get(gpu) if isinstance(gpu, str) else None
        if found is not None:
            return found
        node_id, sep, index_text = gpu.rpartition("/") if isinstance(gpu, str) else ("", "", "")
        # One spelling per GPU: "n1/03" or a non-ASCII digit would let two jobs hold
        # one GPU under two ids (the checks key GPUs by id).
        plain = index_text.isascii() and index_text.isdigit() and index_text == str(int(index_text))
        _require(
            bool(sep) and plain,
            path,
            gpu,
            "must look like '<node>/<index>' (the index in decimal, no leading zeros)",
        )
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

    def held_nodes(self, job: RunningJob) -> tuple[int, ...]:
        """Positions of the nodes running job ``job`` holds: its GPUs' nodes, in the
        order of its GPUs, or the one node a CPU-only job runs on."""
        if job.node is not None:
            return (self.node_index[job.node],)
        return tuple(dict.fromkeys(self.parse_gpu(gpu).node for gpu in job.gpu_ids))

    def held_topology(self, job: RunningJob) -> str:
        """The weakest placement rule ``job`` meets as it runs, for a restart when
        its own is not known: ``"node"`` on one node, ``"rack"`` on several of one
        rack, ``"any"`` beyond (a restart is never held to a shape, NVLink among
        them, that its hardware may not have)."""
        nodes = self.held_nodes(job)
        if len(nodes) == 1:
            return "node"
        return "rack" if len({self.nodes[k].rack for k in nodes}) == 1 else "any"

    def lost_reason(self, job: RunningJob) -> str | None:
        """Why ``job`` is lost ("node n3 is down", "GPU n3/5 failed"; several
        joined by "; "), None when all its GPUs are healthy."""
        return hardware_failure({node.id: node for node in self.nodes}, job.gpu_ids, job.node)

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

    def gpu_area(self, position: int) -> float | None:
        """GPU-seconds queued job ``position`` takes at least (a share counts as its
        fraction, a CPU-only job as one milli-GPU); None when no type can run it."""
        shortest = self.min_duration(position)
        if shortest is None:
            return None
        return max(self.queue[position].gpu_amount, 1 / MILLI) * shortest

    def usage_price(self, position: int, gpu_type: str) -> float:
        """What queued job ``position`` pays for its GPU-seconds on ``gpu_type``
        (:attr:`Policy.gpu_second_prices`; a share pays its fraction), in weighted
        seconds; 0 on an unpriced type."""
        price = self.policy.gpu_second_price(gpu_type)
        if not price:
            return 0.0
        return price * self.queue[position].gpu_amount * self.durations[position][gpu_type]

    def deferred_cost_end(self, position: int) -> int:
        """The end time a deferred job is priced at: horizon + its shortest duration
        on a GPU type some node has (a type no node has would price deferring
        below what the job costs wherever it can run)."""
        here = [d for name, d in self.durations[position].items() if name in self.node_types]
        shortest = min(here) if here else self.min_duration(position)
        if shortest is None:
            job = self.queue[position]
            shortest = (
                job.duration_s
                if job.duration_s is not None
                else min(s for _, s in job.duration_by_type_s)
            )
        return self.policy.horizon_s + shortest

    def __getstate__(self) -> dict[str, Any]:
        # The GPU table is the node tuple's: rebuilt (or found again) on arrival,
        # not sent with every pool (a fifth of a pool's pickle).
        return {k: v for k, v in self.__dict__.items() if k not in ("_gpus", "_healthy")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach_gpus()

    def _attach_gpus(self) -> None:
        """The node tuple's GPU table (:data:`_GPU_REFS`), made or found again."""
        nodes = self.nodes
        gpus, healthy = _GPU_REFS.get(nodes, lambda: _gpu_refs(nodes))
        object.__setattr__(self, "_gpus", gpus)
        object.__setattr__(self, "_healthy", healthy)

    def replace(self, **changes: Any) -> Instance:
        """A copy with ``changes`` applied, validated again."""
        return replace(self, **changes)


def hardware_failure(
    nodes: Mapping[str, Node], gpu_ids: Iterable[str], node: str | None = None
) -> str | None:
    """What failed under ``gpu_ids`` (GPU ids on ``nodes``, by node id) or under a
    CPU-only job's ``node``: "node n3 is down", "GPU n3/5 failed", several
    joined by "; "; None when nothing did.

    GPU ids that name no GPU count as healthy here: validation reports them.
    """
    reasons: dict[str, None] = {}
    if node is not None and node in nodes and nodes[node].down:
        reasons[f"node {node} is down"] = None
    for gpu in gpu_ids:
        node_id, sep, index = gpu.rpartition("/") if isinstance(gpu, str) else ("", "", "")
        host = nodes.get(node_id)
        if host is None or not sep or not index.isdigit():
            continue
        if host.down:
            reasons.setdefault(f"node {node_id} is down", None)
        elif int(index) in host.failed_gpus:
            reasons.setdefault(f"GPU {gpu} failed", None)
    return "; ".join(reasons) or None


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
