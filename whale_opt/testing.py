"""Public Hypothesis strategies that build only valid whale_opt instances.

Use them to property-test your own policy, solver or integration against
the same rules the checker enforces::

    from hypothesis import given, settings
    from whale_opt.check import check
    from whale_opt.testing import instances

    @settings(max_examples=50, deadline=None)
    @given(instances())
    def test_my_policy_is_valid(instance):
        assert check(instance, MyPolicy().decide(instance)) == []

Every instance drawn here passes :class:`~whale_opt.problem_data.Instance`
validation and round-trips through instance@1 JSON. The strategies aim at
the corners where schedulers go wrong: every NVLink layout (NVSwitch,
DGX-1 hybrid cube-mesh, bridged pairs, PCIe only, explicit edge lists),
nodes of one GPU type but different sizes, down nodes and failed GPUs,
running jobs that fragment nodes, gang jobs larger than a node, CPU and
host memory that bind, tenant quotas (some already exceeded by running
work), zone preferences and horizons short enough to force deferral.

Now and then (each in roughly one instance of four or five, so most
instances look as before) they also carry the features of priority and
preemption: priority classes (the defaults, some redefined, and custom
ones of any weight factor, rank and preemptibility) with queued and running
jobs of several classes; aging; tenants with guaranteed shares (at most
their quota); a preemption policy (``min_run_s``, ``max_preemptions``) with
running jobs that report the work since their last checkpoint; draining
nodes; and soft preferences (``preferred_gpu_types``, ``prefer_nvlink``,
with their prices). Keywords of :func:`instances` force each on or off.
Instances stay small (a handful of nodes and jobs) so tests run fast.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from hypothesis import strategies as st

from whale_opt.problem_data import (
    DEFAULT_CLASS,
    DEFAULT_HORIZON_S,
    DEFAULT_PRIORITY_CLASSES,
    TOPOLOGIES,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)

__all__ = [
    "GPU_CATALOGUE",
    "gpu_types",
    "instances",
    "nodes",
    "nvlink_layouts",
    "priority_classes",
]

GPU_CATALOGUE: tuple[GpuType, ...] = (
    GpuType("A100-80G", 80, 1.0),
    GpuType("H100-80G", 80, 2.0),
    GpuType("V100-32G", 32, 0.45),
    GpuType("A100-40G", 40, 1.0),
    GpuType("L4-24G", 24, 0.6),
    GpuType("T4-16G", 16, 0.25),
)
"""GPU models the strategies draw from (name, memory GB, speed)."""

TENANT_NAMES = ("nlp", "cv", "rl")
ZONE_NAMES = ("east", "west")
NODE_SIZES = (8, 4, 2, 1, 3, 6, 16)
NODE_CPUS = (128, 64, 32, 16)
NODE_MEMORIES_GB = (1024, 512, 256, 64)
CUSTOM_CLASS_NAMES = ("urgent", "batch", "spot")
CLASS_WEIGHTS = (1.0, 0.5, 2.0, 5.0, 0.1)
AGING_RATES = (0.5, 0.1, 2.0, 24.0)
MIN_RUNS_S = (0, 600, 3600, 50_000)
PENALTIES_S = (3600, 0, 600)


def _rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in ``one_in`` draws; shrinks towards False."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


def _feature(draw: st.DrawFn, forced: bool | None, one_in: int) -> bool:
    """``forced`` when given, else on about once in ``one_in`` draws (shrinks to off)."""
    return _rarely(draw, one_in) if forced is None else forced


def gpu_types(min_types: int = 1, max_types: int = 3) -> st.SearchStrategy[dict[str, GpuType]]:
    """GPU types keyed by name, drawn from :data:`GPU_CATALOGUE`.

    Parameters
    ----------
    min_types, max_types
        How many distinct types to draw (at most ``len(GPU_CATALOGUE)``).

    Returns
    -------
    SearchStrategy[dict[str, GpuType]]
        Mappings fit for ``Instance(gpu_types=...)``.
    """
    return st.lists(
        st.sampled_from(GPU_CATALOGUE),
        min_size=min_types,
        max_size=min(max_types, len(GPU_CATALOGUE)),
        unique_by=lambda t: t.name,
    ).map(lambda types: {t.name: t for t in types})


def nvlink_layouts(gpus: int) -> st.SearchStrategy[str | tuple[tuple[int, int], ...]]:
    """Every NVLink layout a node of ``gpus`` GPUs may declare.

    Named layouts (``nvswitch``, ``pairs``, ``pcie`` and, for 8 GPUs,
    ``hybrid-cube-mesh``) and explicit edge lists: a ring, a chain, or any
    set of links (possibly empty, possibly disconnected, pairs in either
    order).

    Parameters
    ----------
    gpus
        GPUs on the node (>= 1).

    Returns
    -------
    SearchStrategy[str | tuple[tuple[int, int], ...]]
        Values fit for ``Node(nvlink=...)``.
    """
    named = ["nvswitch", "pcie", "pairs"] + (["hybrid-cube-mesh"] if gpus == 8 else [])
    options: list[st.SearchStrategy[str | tuple[tuple[int, int], ...]]] = [st.sampled_from(named)]
    if gpus >= 2:
        chain = tuple((i, i + 1) for i in range(gpus - 1))
        ring = (*chain, (gpus - 1, 0)) if gpus >= 3 else chain
        pairs = list(itertools.combinations(range(gpus), 2))
        options.append(st.sampled_from([chain, ring]))
        options.append(
            st.lists(
                st.tuples(st.sampled_from(pairs), st.booleans()),
                unique_by=lambda edge: edge[0],
                max_size=len(pairs),
            ).map(lambda edges: tuple((b, a) if flip else (a, b) for (a, b), flip in edges))
        )
    return st.one_of(options)


@st.composite
def priority_classes(
    draw: st.DrawFn, *, min_custom: int = 0, max_custom: int = 2
) -> dict[str, PriorityClass]:
    """Priority classes keyed by name: the defaults, now and then one redefined,
    and custom ones.

    Custom classes (``urgent``, ``batch``, ``spot``) take any weight factor
    (0.1 to 5), rank (-1 to 3, so ties with the defaults happen) and
    preemptibility; a redefined default (``online``, ``training``,
    ``best-effort``) keeps its name with new values, as an instance file
    may redefine it.

    Parameters
    ----------
    min_custom, max_custom
        How many custom classes (at most ``len(CUSTOM_CLASS_NAMES)``).

    Returns
    -------
    SearchStrategy[dict[str, PriorityClass]]
        Mappings fit for ``Instance(priority_classes=...)``.
    """
    names = draw(
        st.lists(
            st.sampled_from(CUSTOM_CLASS_NAMES),
            unique=True,
            min_size=min_custom,
            max_size=min(max_custom, len(CUSTOM_CLASS_NAMES)),
        )
    )
    if _rarely(draw, 4):
        names.append(draw(st.sampled_from(sorted(DEFAULT_PRIORITY_CLASSES))))
    classes = dict(DEFAULT_PRIORITY_CLASSES)
    for name in names:
        classes[name] = PriorityClass(
            name,
            weight=draw(st.sampled_from(CLASS_WEIGHTS)),
            rank=draw(st.integers(-1, 3)),
            preemptible=draw(st.booleans()),
        )
    return classes


class _NodeKind(NamedTuple):
    """A server model: what identical nodes share."""

    gpu_type: str
    gpu_count: int
    nvlink: str | tuple[tuple[int, int], ...]
    cpu: float
    memory_gb: float


@st.composite
def _node_kind(draw: st.DrawFn, type_names: Sequence[str]) -> _NodeKind:
    """A server model: GPU type, size, NVLink layout, CPU and host memory."""
    gpus = draw(st.sampled_from(NODE_SIZES))
    return _NodeKind(
        gpu_type=draw(st.sampled_from(type_names)),
        gpu_count=gpus,
        nvlink=draw(nvlink_layouts(gpus)),
        cpu=draw(st.sampled_from(NODE_CPUS)),
        memory_gb=draw(st.sampled_from(NODE_MEMORIES_GB)),
    )


@st.composite
def nodes(
    draw: st.DrawFn,
    type_names: Sequence[str] = ("A100-80G",),
    *,
    min_nodes: int = 1,
    max_nodes: int = 6,
    max_racks: int = 3,
    zones: Sequence[str] = ZONE_NAMES,
    with_failures: bool = True,
    draining: bool = False,
) -> tuple[Node, ...]:
    """Servers of a few models, spread over racks, some broken, some draining.

    Nodes are drawn from one to three server models, as in a real cluster,
    so identical nodes (interchangeable for a multi-node gang) are common,
    yet one GPU type may come in nodes of different sizes. Each rack sits in
    one zone.

    Parameters
    ----------
    type_names
        GPU type names the nodes may carry.
    min_nodes, max_nodes
        How many nodes.
    max_racks
        Racks ``r0`` .. ``r{max_racks - 1}`` the nodes are spread over.
    zones
        Zone names; empty for nodes without a zone.
    with_failures
        Whether some nodes are down and some GPUs failed.
    draining
        Whether some nodes drain (about one in three, at least one; a
        draining node may also be down or have failed GPUs).

    Returns
    -------
    SearchStrategy[tuple[Node, ...]]
        Nodes with ids ``n0``, ``n1``, ...
    """
    kinds = draw(st.lists(_node_kind(type_names), min_size=1, max_size=3))
    count = draw(st.integers(min_nodes, max_nodes))
    racks = draw(st.integers(1, max_racks))
    rack_zone = {
        f"r{k}": (draw(st.sampled_from(list(zones))) if zones else None) for k in range(racks)
    }
    result = []
    for k in range(count):
        kind = draw(st.sampled_from(kinds))
        gpus = kind.gpu_count
        rack = f"r{draw(st.integers(0, racks - 1))}"
        down = with_failures and _rarely(draw, 8)
        failed: tuple[int, ...] = ()
        if with_failures and _rarely(draw, 4):
            failed = tuple(
                draw(st.lists(st.integers(0, gpus - 1), unique=True, min_size=1, max_size=2))
            )
        result.append(
            Node(
                id=f"n{k}",
                rack=rack,
                zone=rack_zone[rack],
                down=down,
                failed_gpus=failed,
                draining=draining and _rarely(draw, 3),
                **kind._asdict(),
            )
        )
    if draining and not any(node.draining for node in result):
        k = draw(st.integers(0, count - 1))
        result[k] = replace(result[k], draining=True)
    return tuple(result)


@st.composite
def _running_jobs(
    draw: st.DrawFn,
    cluster: Sequence[Node],
    tenants: Sequence[str],
    max_running: int,
    classes: Sequence[str] = (DEFAULT_CLASS,),
    checkpoints: bool = False,
) -> tuple[RunningJob, ...]:
    """Running jobs on distinct healthy GPUs, mostly within each node's CPU and memory.

    Now and then a job overcommits a node's CPU or memory: the data model
    accepts the state a cluster reports, and the rules then only forbid new
    work on that node while the overload lasts. Each job is of one of
    ``classes``; with ``checkpoints``, most report the work done since their
    last checkpoint (at most the time since they started).
    """
    free = {node.id: list(node.healthy_indices) for node in cluster}
    cpu_left = {node.id: float(node.cpu) for node in cluster}
    memory_left = {node.id: float(node.memory_gb) for node in cluster}
    jobs = []
    for k in range(draw(st.integers(0, max_running))):
        hosts = [node.id for node in cluster if free[node.id]]
        if not hosts:
            break
        first = draw(st.sampled_from(hosts))
        chosen = [first]
        others = [h for h in hosts if h != first]
        if others and _rarely(draw, 4):
            chosen.append(draw(st.sampled_from(others)))
        per_node: dict[str, list[int]] = {}
        for host in chosen:
            size = draw(st.integers(1, len(free[host])))
            per_node[host] = draw(st.permutations(free[host]))[:size]
            free[host] = [i for i in free[host] if i not in per_node[host]]
        total = sum(len(v) for v in per_node.values())
        # The job's CPU and memory are spread over its nodes by GPU share:
        # keep every node's share within what is left there.
        cpu_cap = min(cpu_left[h] * total / len(v) for h, v in per_node.items())
        memory_cap = min(memory_left[h] * total / len(v) for h, v in per_node.items())
        stretch = 1.5 if _rarely(draw, 10) else 1.0
        cpu = draw(st.integers(0, math.floor(max(0.0, cpu_cap) * stretch + 1e-9)))
        memory_gb = draw(st.integers(0, math.floor(max(0.0, memory_cap) * stretch + 1e-9)))
        for host, indices in per_node.items():
            cpu_left[host] -= cpu * len(indices) / total
            memory_left[host] -= memory_gb * len(indices) / total
        started_at = draw(st.integers(-100_000, 0))
        jobs.append(
            RunningJob(
                id=f"r{k}",
                gpu_ids=tuple(f"{h}/{i}" for h, v in per_node.items() for i in v),
                remaining_s=draw(st.integers(1, 20_000)),
                tenant=draw(st.sampled_from(tenants)),
                cpu=cpu,
                memory_gb=memory_gb,
                started_at=started_at,
                weight=draw(st.sampled_from([1.0, 2.0, 0.5, 4.0])),
                preemptible=draw(st.booleans()),
                checkpoint_s=draw(st.integers(0, 600)),
                priority_class=_one_class(draw, classes),
                since_checkpoint_s=_since_checkpoint(draw, -started_at) if checkpoints else None,
            )
        )
    return tuple(jobs)


def _since_checkpoint(draw: st.DrawFn, elapsed: int) -> int | None:
    """Work since the last checkpoint of a job that has run ``elapsed`` seconds:
    unknown, within a checkpoint interval (up to an hour), or any of it."""
    return draw(st.one_of(st.none(), st.integers(0, min(elapsed, 3600)), st.integers(0, elapsed)))


def _one_class(draw: st.DrawFn, classes: Sequence[str]) -> str:
    """One of ``classes`` (no draw when there is only one)."""
    return classes[0] if len(classes) == 1 else draw(st.sampled_from(classes))


@st.composite
def _queued_job(
    draw: st.DrawFn,
    job_id: str,
    types: Mapping[str, GpuType],
    cluster: Sequence[Node],
    tenants: Sequence[str],
    zones: Sequence[str],
    classes: Sequence[str] = (DEFAULT_CLASS,),
    preferences: bool = False,
    force_preference: bool = False,
) -> QueuedJob:
    """One queued job of any topology; sometimes unservable, sometimes binding.

    It is of one of ``classes``. With ``preferences``, about half the jobs
    (every one with ``force_preference``) prefer GPU types (mostly present
    ones, a required type or not), an NVLink-connected placement, or both.
    """
    topology = draw(st.sampled_from(TOPOLOGIES))
    present = [node.gpu_type for node in cluster]
    if topology == "nvlink" and _rarely(draw, 3):
        # A multi-node gang: whole nodes the size of one in the cluster.
        gpus = draw(st.sampled_from(cluster)).gpu_count * draw(st.integers(2, 3))
    else:
        gpus = draw(st.sampled_from([1, 2, 4, 8, 3]))
    names = sorted(types)
    allowed: list[str] = []
    if _rarely(draw, 3):
        # Mostly types the cluster has; sometimes one it lacks (then: deferred).
        pool = names if _rarely(draw, 4) else sorted(set(present))
        allowed = draw(st.lists(st.sampled_from(pool), unique=True, min_size=1))
    # A floor some present type meets, or now and then one none meets.
    floors = [0.0] * 4 + sorted({float(types[name].memory_gb) for name in present}) + [100.0]
    memory_floor = draw(st.sampled_from(floors))
    duration_s: int | None = draw(
        st.one_of(st.integers(1, 5_000), st.integers(1, 200_000), st.none())
    )
    by_type: tuple[tuple[str, int], ...] = ()
    if duration_s is None or _rarely(draw, 4):
        measured = draw(
            st.lists(st.sampled_from(allowed or sorted(set(present))), unique=True, min_size=1)
        )
        # Sorted by name, as instance@1 reading produces them.
        by_type = tuple((name, draw(st.integers(1, 10_000))) for name in sorted(measured))
    cpu_per_gpu = draw(st.sampled_from([0, 0, 2, 8, 16, 48]))
    memory_per_gpu = draw(st.sampled_from([0, 0, 16, 64, 200]))
    preferred: list[str] = []
    prefer_nvlink = False
    if preferences and (force_preference or draw(st.booleans())):
        wants = draw(st.sampled_from(["gpu_type", "nvlink", "both"]))
        if wants != "nvlink":
            pool = names if _rarely(draw, 4) else sorted(set(present))
            preferred = draw(st.lists(st.sampled_from(pool), unique=True, min_size=1, max_size=2))
        prefer_nvlink = wants != "gpu_type"
    return QueuedJob(
        id=job_id,
        gpu_count=gpus,
        duration_s=duration_s,
        tenant=draw(st.sampled_from(tenants)),
        gpu_types=tuple(allowed),
        min_gpu_memory_gb=memory_floor,
        cpu=float(cpu_per_gpu * gpus),
        memory_gb=float(memory_per_gpu * gpus),
        weight=draw(st.sampled_from([1.0, 2.0, 0.5, 3.0, 10.0])),
        submitted_at=draw(st.integers(-86_400, 0)),
        topology=topology,
        preemptible=draw(st.booleans()),
        zone=draw(st.sampled_from(list(zones))) if zones and _rarely(draw, 3) else None,
        duration_by_type_s=by_type,
        priority_class=_one_class(draw, classes),
        preferred_gpu_types=tuple(preferred),
        prefer_nvlink=prefer_nvlink,
    )


@st.composite
def instances(
    draw: st.DrawFn,
    *,
    max_nodes: int = 6,
    max_queue: int = 8,
    max_running: int = 4,
    max_gpu_types: int = 3,
    min_queue: int = 0,
    with_failures: bool = True,
    with_quotas: bool = True,
    with_zones: bool = True,
    priority: bool | None = None,
    aging: bool | None = None,
    guarantees: bool | None = None,
    preemption: bool | None = None,
    draining: bool | None = None,
    preferences: bool | None = None,
) -> Instance:
    """Valid one-round instances: cluster, running jobs, queue, tenants, policy.

    The last six keywords switch a feature of priority and preemption on
    (``True``), off (``False``) or leave it to the draw (``None``, the
    default: on in about one instance of four or five, and off again when
    Hypothesis shrinks a failure unless the failure needs it).

    Parameters
    ----------
    max_nodes
        At most this many nodes (at least one).
    max_queue, min_queue
        Bounds on the number of queued jobs.
    max_running
        At most this many running jobs (fewer when the cluster is full).
    max_gpu_types
        At most this many GPU types.
    with_failures
        Whether some nodes are down and some GPUs failed.
    with_quotas
        Whether some tenants have GPU quotas (possibly already exceeded
        by their running jobs, which the rules allow).
    with_zones
        Whether nodes carry zones and some jobs prefer one.
    priority
        Priority classes (:func:`priority_classes`: the defaults, perhaps
        one redefined, and up to two custom ones), queued and running jobs
        spread over all of them. Off: every job is of the default class
        (``training``).
    aging
        ``policy.aging_per_hour`` > 0 (0.1 to 24): waiting jobs (submitted
        up to a day ago) weigh more.
    guarantees
        Tenants with ``guaranteed_gpus`` (at most their quota; at least one
        tenant has one, possibly 0).
    preemption
        ``policy.allow_preemption`` with ``min_run_s`` (0 to 50,000 s) and
        ``max_preemptions`` (none, or 0 to 3), running jobs that report
        ``since_checkpoint_s`` (mostly; at most their run time so far).
    draining
        Draining nodes (about one in three, at least one).
    preferences
        Soft preferences beyond the zone: about half the queued jobs (with
        ``True``, the first one always) prefer GPU types, an NVLink-connected
        placement, or both; ``gpu_type_penalty_s`` and ``nvlink_penalty_s``
        drawn (3600, 0 or 600).

    Returns
    -------
    SearchStrategy[Instance]
        Instances that pass every check of
        :class:`~whale_opt.problem_data.Instance`.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(instances(max_nodes=3, max_queue=4))
    ... def test_something(instance): ...
    >>> @given(instances(preemption=True, priority=True, min_queue=1))
    ... def test_my_preemptions(instance): ...
    """
    has_priority = _feature(draw, priority, 4)
    has_aging = _feature(draw, aging, 5)
    has_guarantees = _feature(draw, guarantees, 4)
    allow_preemption = _feature(draw, preemption, 4)
    has_draining = _feature(draw, draining, 5)
    has_preferences = _feature(draw, preferences, 4)
    types = draw(gpu_types(max_types=max_gpu_types))
    zones = ZONE_NAMES if with_zones else ()
    cluster = draw(
        nodes(
            list(types),
            max_nodes=max_nodes,
            zones=zones,
            with_failures=with_failures,
            draining=has_draining,
        )
    )
    classes = draw(priority_classes()) if has_priority else dict(DEFAULT_PRIORITY_CLASSES)
    class_names = sorted(classes) if has_priority else [DEFAULT_CLASS]
    tenant_names = TENANT_NAMES[: draw(st.integers(1, len(TENANT_NAMES)))]
    running = draw(_running_jobs(cluster, tenant_names, max_running, class_names, allow_preemption))
    count = draw(st.integers(min_queue, max_queue))
    queue = tuple(
        draw(
            _queued_job(
                f"q{k}",
                types,
                cluster,
                tenant_names,
                zones,
                class_names,
                has_preferences,
                force_preference=bool(preferences) and k == 0,
            )
        )
        for k in range(count)
    )
    tenants: dict[str, Tenant] = {}
    if with_quotas:
        for name in tenant_names:
            if draw(st.booleans()):
                quota = draw(st.one_of(st.integers(0, 16), st.none()))
                tenants[name] = Tenant(name, quota)
    if has_guarantees:
        tenants = draw(_with_guarantees(tenants, tenant_names))
    horizon = draw(st.one_of(st.just(DEFAULT_HORIZON_S), st.integers(1, 5_000)))
    policy = Policy(
        horizon_s=horizon,
        zone_penalty_s=draw(st.sampled_from([3600, 0, 600])),
        allow_preemption=allow_preemption,
        gpu_type_penalty_s=draw(st.sampled_from(PENALTIES_S)) if has_preferences else 3600,
        nvlink_penalty_s=draw(st.sampled_from(PENALTIES_S)) if has_preferences else 3600,
        aging_per_hour=draw(st.sampled_from(AGING_RATES)) if has_aging else 0.0,
        min_run_s=draw(st.sampled_from(MIN_RUNS_S)) if allow_preemption else 0,
        max_preemptions=(
            draw(st.one_of(st.none(), st.integers(0, 3))) if allow_preemption else None
        ),
    )
    return Instance(
        name="hypothesis",
        gpu_types=types,
        nodes=cluster,
        running=running,
        queue=queue,
        tenants=tenants,
        policy=policy,
        now=draw(st.integers(0, 10**9)),
        priority_classes=classes,
    )


@st.composite
def _with_guarantees(
    draw: st.DrawFn, tenants: Mapping[str, Tenant], names: Sequence[str]
) -> dict[str, Tenant]:
    """``tenants`` with guaranteed shares (at most the quota) for about half of
    ``names``, and at least one."""
    chosen = [name for name in names if draw(st.booleans())] or [names[0]]
    out = dict(tenants)
    for name in chosen:
        quota = out[name].gpu_quota if name in out else None
        guarantee = draw(st.integers(0, 16 if quota is None else quota))
        out[name] = Tenant(name, quota, guarantee)
    return out
