"""Seeded synthetic traces and clusters, so the CLI and benchmarks run without data.

Job shapes follow :mod:`whale_opt.generate` (itself shaped on public traces):
45% 1-GPU jobs, a tail of 8-64 GPU gangs, log-normal durations (sigma 1.1)
around a median, weights 1/2/4, a quarter of jobs pinned to one GPU type.
Arrivals are a Poisson process whose rate makes the offered work ``load``
times the cluster's healthy GPU capacity. Every job fits the cluster when it
is healthy: sizes shrink until some rack can hold them.

:func:`tenant_trace` adds what issue 6 is about: tenants with their own
(optionally bursty) arrivals, priority classes, checkpoint/restore times and
soft preferences; :func:`tenant_cluster` a cluster whose tenants hold
guaranteed shares.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from whale_opt.generate import TENANTS, generate, job_size
from whale_opt.problem_data import Instance, QueuedJob, Tenant, tenant_quota
from whale_opt.sim.trace import TraceJob
from whale_opt.topology import NodeTopology, node_can_host, node_topologies, popcount


def synthetic_cluster(gpus: int = 1024, *, family: str = "hetero", seed: int = 0) -> Instance:
    """A cluster of about ``gpus`` GPUs (a :func:`whale_opt.generate.generate` family), idle."""
    busy = generate(family, gpus=gpus, queued=0, seed=seed)
    return busy.replace(name=f"{family}-{gpus}g-s{seed}", running=(), queue=())


class _Fit:
    """Whether a job shape could run on the healthy cluster (cached per shape)."""

    def __init__(self, cluster: Instance) -> None:
        self.cluster = cluster
        self.topologies: tuple[NodeTopology, ...] = node_topologies(cluster)
        self.cache: dict[tuple[object, ...], bool] = {}

    def __call__(self, job: QueuedJob) -> bool:
        key = (job.gpu_count, job.gpu_types, job.min_gpu_memory_gb, job.topology)
        if key not in self.cache:
            self.cache[key] = self._fits(job)
        return self.cache[key]

    def _fits(self, job: QueuedJob) -> bool:
        probe = self.cluster.replace(queue=(job,))
        types = set(probe.eligible_types[0])
        hosts = [
            topo
            for topo in self.topologies
            if topo.node.gpu_type in types and node_can_host(job, topo)
        ]
        if not hosts:
            return False
        groups: dict[tuple[str, ...], int] = defaultdict(int)
        for topo in hosts:
            node = topo.node
            if job.topology == "nvlink" and job.gpu_count > topo.size:
                if job.gpu_count % topo.size == 0:
                    groups[(node.rack, node.gpu_type, str(topo.size))] += topo.size
            elif job.topology in ("nvlink", "node"):
                return True
            elif job.topology == "rack":
                groups[(node.rack, node.gpu_type)] += popcount(topo.healthy)
            else:
                groups[(node.gpu_type,)] += popcount(topo.healthy)
        return any(total >= job.gpu_count for total in groups.values())


def _pick_shape(rng: np.random.Generator, present: list[str], node_size: dict[str, int]) -> dict:
    """Size, types, memory and topology of one job, as generate's queues draw them."""
    size = job_size(rng)
    topology = "nvlink"
    types: tuple[str, ...] = ()
    memory = float(rng.choice([0, 0, 16, 24, 40, 80]))
    roll = rng.random()
    if roll < 0.25:
        types = (str(rng.choice(present)),)
        memory = 0.0
    elif roll < 0.35 and size <= 4:
        topology = "node"
    elif roll < 0.4:
        topology = "any"
    largest = max(node_size[t] for t in (types or present))
    if topology == "nvlink" and size > largest:
        size = largest * max(1, size // largest)
    if topology == "node":
        size = min(size, largest)
    return {
        "gpu_count": size,
        "gpu_types": types,
        "min_gpu_memory_gb": memory,
        "topology": topology,
    }


def _servable(fits: _Fit, job: QueuedJob) -> QueuedJob:
    """``job``, made smaller (then looser) until the healthy cluster could run it."""
    while not fits(job):
        if job.gpu_count > 1:
            job = replace(job, gpu_count=job.gpu_count // 2)
        elif job.min_gpu_memory_gb > 0 or job.gpu_types:
            job = replace(job, min_gpu_memory_gb=0.0, gpu_types=())
        elif job.topology != "any":
            job = replace(job, topology="any")
        else:
            raise ValueError(f"cluster {fits.cluster.name} cannot run even a 1-GPU job")
    return job


def synthetic_trace(
    n_jobs: int,
    cluster: Instance,
    *,
    load: float = 0.8,
    seed: int = 0,
    median_duration_s: float = 7200.0,
) -> tuple[TraceJob, ...]:
    """``n_jobs`` seeded jobs for ``cluster``, arriving at an offered ``load``.

    ``load`` is the offered work (GPU-seconds at the cluster's mean speed)
    over the healthy GPU capacity per second: 1.0 keeps the cluster exactly
    busy if packing were perfect. Durations are estimates (``duration_s``);
    the simulator draws the actual ones with its own noise.
    """
    if n_jobs < 1 or not math.isfinite(load) or load <= 0:
        raise ValueError("n_jobs must be >= 1 and load > 0")
    rng = np.random.default_rng(seed)
    healthy = [n for n in cluster.nodes if n.healthy_indices]
    if not healthy:
        raise ValueError(f"cluster {cluster.name} has no healthy GPU")
    capacity = sum(len(n.healthy_indices) for n in healthy)
    mean_speed = (
        sum(len(n.healthy_indices) * cluster.gpu_types[n.gpu_type].speed for n in healthy)
        / capacity
    )
    present = sorted({n.gpu_type for n in healthy})
    node_size = {t: max(n.gpu_count for n in healthy if n.gpu_type == t) for t in present}
    tenants = sorted(cluster.tenants) or list(TENANTS)
    # Host requests no node would refuse: clusters that give no CPU get no CPU asks.
    cpu_per_gpu = min(6.0, *(n.cpu / n.gpu_count for n in healthy))
    memory_per_gpu = min(24.0, *(n.memory_gb / n.gpu_count for n in healthy))
    fits = _Fit(cluster)
    jobs: list[QueuedJob] = []
    for k in range(n_jobs):
        shape = _pick_shape(rng, present, node_size)
        tenant = str(rng.choice(tenants))
        quota = tenant_quota(cluster, tenant)
        if quota is not None:
            shape["gpu_count"] = max(1, min(shape["gpu_count"], quota))
        job = QueuedJob(
            id=f"job-{k:05d}",
            tenant=tenant,
            duration_s=max(60, int(rng.lognormal(math.log(median_duration_s), 1.1))),
            weight=float(rng.choice([1, 1, 1, 2, 4])),
            **shape,
        )
        job = _servable(fits, job)
        jobs.append(
            replace(job, cpu=cpu_per_gpu * job.gpu_count, memory_gb=memory_per_gpu * job.gpu_count)
        )
    work = sum(job.gpu_count * (job.duration_s or 0) / mean_speed for job in jobs)
    mean_gap = work / (load * capacity) / n_jobs
    arrivals = np.cumsum(rng.exponential(mean_gap, n_jobs)) - mean_gap
    return tuple(TraceJob.of(job, max(0, int(at))) for job, at in zip(jobs, arrivals, strict=True))


DEFAULT_CLASS_MIX: Mapping[str, float] = {"online": 0.15, "training": 0.55, "best-effort": 0.3}
# Duration scale per class: online serving jobs are short, best-effort sweeps long.
CLASS_DURATION = {"online": 0.25, "training": 1.0, "best-effort": 2.0}


def tenant_cluster(
    gpus: int = 256,
    *,
    tenants: Sequence[str] = ("nlp", "cv", "speech"),
    guaranteed_share: float = 0.8,
    allow_preemption: bool = True,
    family: str = "hetero",
    seed: int = 0,
) -> Instance:
    """:func:`synthetic_cluster` with ``tenants`` splitting ``guaranteed_share`` of
    its healthy GPUs equally as guarantees (no quotas), preemption as asked."""
    if not tenants or not 0 <= guaranteed_share <= 1:
        raise ValueError("tenants must not be empty and guaranteed_share in [0, 1]")
    cluster = synthetic_cluster(gpus, family=family, seed=seed)
    healthy = sum(len(node.healthy_indices) for node in cluster.nodes)
    each = int(healthy * guaranteed_share) // len(tenants)
    return cluster.replace(
        name=f"{cluster.name}-{len(tenants)}t",
        tenants={name: Tenant(name, guaranteed_gpus=each) for name in tenants},
        policy=replace(cluster.policy, allow_preemption=allow_preemption),
    )


def _arrivals(
    rng: np.random.Generator, count: int, span: float, burst_s: float | None
) -> np.ndarray:
    """``count`` Poisson arrivals over about ``span`` seconds; with ``burst_s``, only in
    on-phases of that length alternating with equal off-phases (random phase)."""
    if burst_s is None:
        gap = span / count
        return np.cumsum(rng.exponential(gap, count)) - gap
    gap = span / 2 / count  # the same jobs in half the time: on-phases only
    on_time = np.cumsum(rng.exponential(gap, count)) - gap
    offset = rng.uniform(0, 2 * burst_s)  # each tenant's own phase
    return (on_time // burst_s) * 2 * burst_s + on_time % burst_s + offset


def tenant_trace(
    n_jobs: int,
    cluster: Instance,
    *,
    load: float = 1.0,
    seed: int = 0,
    median_duration_s: float = 3600.0,
    tenant_load: Mapping[str, float] | None = None,
    class_mix: Mapping[str, float] | None = None,
    checkpoint_s: int = 120,
    burst_s: float | None = None,
) -> tuple[TraceJob, ...]:
    """``n_jobs`` seeded multi-tenant jobs for ``cluster`` at an offered ``load``.

    Parameters
    ----------
    tenant_load
        Relative share of the jobs per tenant (default: the cluster's tenants,
        else :data:`whale_opt.generate.TENANTS`, equal shares). Each tenant
        arrives on its own Poisson process.
    class_mix
        Share of jobs per priority class (default :data:`DEFAULT_CLASS_MIX`,
        restricted to the cluster's classes). Durations scale per class
        (:data:`CLASS_DURATION`: online short, best-effort long).
    checkpoint_s
        Restore time of the jobs of preemptible classes (0 for the others).
    burst_s
        Tenants arrive in bursts: on for ``burst_s`` seconds, off as long,
        each tenant at its own phase, so tenants borrow each other's idle
        guarantees and then claim them back (None: steady arrivals).

    Shapes are :func:`synthetic_trace`'s; a tenth of the jobs free to run on
    any type prefer the fastest present, and half the ``any``-topology jobs
    of more than one GPU prefer NVLink.
    """
    if n_jobs < 1 or not math.isfinite(load) or load <= 0:
        raise ValueError("n_jobs must be >= 1 and load > 0")
    if burst_s is not None and burst_s <= 0:
        raise ValueError("burst_s must be > 0")
    rng = np.random.default_rng([seed, 6])
    base = synthetic_trace(n_jobs, cluster, load=load, seed=seed, median_duration_s=1.0)
    shares = dict(tenant_load) if tenant_load is not None else None
    if shares is None:
        shares = {name: 1.0 for name in (sorted(cluster.tenants) or TENANTS)}
    mix = {
        name: share
        for name, share in (class_mix or DEFAULT_CLASS_MIX).items()
        if name in cluster.priority_classes
    }
    if not shares or not mix or min(shares.values()) < 0 or min(mix.values()) < 0:
        raise ValueError("tenant_load and class_mix need names with shares >= 0")
    tenants, classes = sorted(shares), sorted(mix)
    present = {n.gpu_type for n in cluster.nodes if n.healthy_indices}
    fastest = max(sorted(present), key=lambda t: cluster.gpu_types[t].speed)
    jobs: list[TraceJob] = []
    for job in base:
        tenant = str(rng.choice(tenants, p=_normalised(shares, tenants)))
        klass = str(rng.choice(classes, p=_normalised(mix, classes)))
        quota = tenant_quota(cluster, tenant)
        gpus = job.gpus if quota is None else max(1, min(job.gpus, quota))
        duration = rng.lognormal(math.log(median_duration_s * CLASS_DURATION.get(klass, 1.0)), 1.1)
        preemptible = cluster.priority_classes[klass].preemptible
        prefer_type = not job.gpu_types and rng.random() < 0.1
        jobs.append(
            replace(
                job,
                gpus=gpus,
                cpu=job.cpu / job.gpus * gpus,
                memory_gb=job.memory_gb / job.gpus * gpus,
                duration_s=max(60, int(duration)),
                tenant=tenant,
                priority_class=klass,
                checkpoint_s=checkpoint_s if preemptible else 0,
                preferred_gpu_types=(fastest,) if prefer_type else (),
                prefer_nvlink=job.topology == "any" and gpus > 1 and rng.random() < 0.5,
            )
        )
    healthy = [n for n in cluster.nodes if n.healthy_indices]
    capacity = sum(len(n.healthy_indices) for n in healthy)
    speed = sum(len(n.healthy_indices) * cluster.gpu_types[n.gpu_type].speed for n in healthy)
    work = sum(job.gpus * (job.duration_s or 0) for job in jobs) / (speed / capacity)
    span = work / (load * capacity)
    at = np.zeros(len(jobs))
    for tenant in tenants:
        members = [k for k, job in enumerate(jobs) if job.tenant == tenant]
        if members:
            at[members] = _arrivals(rng, len(members), span, burst_s)
    order = sorted(range(len(jobs)), key=lambda k: (at[k], k))
    return tuple(
        replace(jobs[k], id=f"job-{n:05d}", submit_s=max(0, int(at[k])))
        for n, k in enumerate(order)
    )


def _normalised(shares: Mapping[str, float], names: list[str]) -> np.ndarray:
    weights = np.array([shares[name] for name in names], dtype=float)
    if weights.sum() <= 0:
        raise ValueError("shares must not all be 0")
    return weights / weights.sum()
