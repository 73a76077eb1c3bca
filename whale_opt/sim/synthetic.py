"""Seeded synthetic traces and clusters, so the CLI and benchmarks run without data.

Job shapes follow :mod:`whale_opt.generate` (itself shaped on public traces):
45% 1-GPU jobs, a tail of 8-64 GPU gangs, log-normal durations (sigma 1.1)
around a median, weights 1/2/4, a quarter of jobs pinned to one GPU type.
Arrivals are a Poisson process whose rate makes the offered work ``load``
times the cluster's healthy GPU capacity. Every job fits the cluster when it
is healthy: sizes shrink until some rack can hold them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np

from whale_opt.generate import TENANTS, generate, job_size
from whale_opt.problem_data import Instance, QueuedJob, tenant_quota
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
        key = (job.gpus, job.gpu_types, job.min_gpu_memory_gb, job.topology)
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
            if job.topology == "nvlink" and job.gpus > topo.size:
                if job.gpus % topo.size == 0:
                    groups[(node.rack, node.gpu_type, str(topo.size))] += topo.size
            elif job.topology in ("nvlink", "node"):
                return True
            elif job.topology == "rack":
                groups[(node.rack, node.gpu_type)] += popcount(topo.healthy)
            else:
                groups[(node.gpu_type,)] += popcount(topo.healthy)
        return any(total >= job.gpus for total in groups.values())


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
    return {"gpus": size, "gpu_types": types, "min_gpu_memory_gb": memory, "topology": topology}


def _servable(fits: _Fit, job: QueuedJob) -> QueuedJob:
    """``job``, made smaller (then looser) until the healthy cluster could run it."""
    while not fits(job):
        if job.gpus > 1:
            job = replace(job, gpus=job.gpus // 2)
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
    node_size = {t: max(n.gpus for n in healthy if n.gpu_type == t) for t in present}
    tenants = sorted(cluster.tenants) or list(TENANTS)
    # Host requests no node would refuse: clusters that give no CPU get no CPU asks.
    cpu_per_gpu = min(6.0, *(n.cpu / n.gpus for n in healthy))
    memory_per_gpu = min(24.0, *(n.memory_gb / n.gpus for n in healthy))
    fits = _Fit(cluster)
    jobs: list[QueuedJob] = []
    for k in range(n_jobs):
        shape = _pick_shape(rng, present, node_size)
        tenant = str(rng.choice(tenants))
        quota = tenant_quota(cluster, tenant)
        if quota is not None:
            shape["gpus"] = max(1, min(shape["gpus"], quota))
        job = QueuedJob(
            id=f"job-{k:05d}",
            tenant=tenant,
            duration_s=max(60, int(rng.lognormal(math.log(median_duration_s), 1.1))),
            weight=float(rng.choice([1, 1, 1, 2, 4])),
            **shape,
        )
        job = _servable(fits, job)
        jobs.append(replace(job, cpu=cpu_per_gpu * job.gpus, memory_gb=memory_per_gpu * job.gpus))
    work = sum(job.gpus * (job.duration_s or 0) / mean_speed for job in jobs)
    mean_gap = work / (load * capacity) / n_jobs
    arrivals = np.cumsum(rng.exponential(mean_gap, n_jobs)) - mean_gap
    return tuple(
        TraceJob(
            id=job.id,
            submit_s=max(0, int(at)),
            gpus=job.gpus,
            duration_s=job.duration_s,
            gpu_types=job.gpu_types,
            min_gpu_memory_gb=job.min_gpu_memory_gb,
            cpu=job.cpu,
            memory_gb=job.memory_gb,
            weight=job.weight,
            tenant=job.tenant,
            topology=job.topology,
        )
        for job, at in zip(jobs, arrivals, strict=True)
    )
