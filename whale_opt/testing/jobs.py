"""Strategies for the work on a cluster: running jobs on distinct healthy GPUs
and queued jobs of any topology, class and preference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hypothesis import strategies as st

from whale_opt.problem_data import DEFAULT_CLASS, TOPOLOGIES, GpuType, Node, QueuedJob, RunningJob
from whale_opt.testing.cluster import _rarely


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
