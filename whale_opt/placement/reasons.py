"""Why a job got no place this round, in words a user acts on."""

from __future__ import annotations

from whale_opt.decision import JobDecision
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance
from whale_opt.rules import unreleased_plans
from whale_opt.topology import node_can_host, popcount


def unjustified_plans(instance: Instance, decided: dict[int, JobDecision]) -> set[int]:
    """Queue positions of planned jobs that break the release rule (:mod:`whale_opt.rules`)."""
    position = {instance.queue[k].id: k for k in decided}
    return {position[job_id] for job_id in unreleased_plans(instance, decided.values())}


def deferral_reason(instance: Instance, position: int, timeline: ClusterState) -> str:
    """Why queued job ``position`` got no place, in words a user acts on."""
    job = instance.queue[position]
    present = {node.gpu_type for node in instance.nodes}
    asked = set(job.gpu_types or instance.gpu_types)
    types = instance.eligible_types[position]
    if not types:
        if not asked & present:
            return f"no node has GPU type {', '.join(sorted(asked))}"
        return (
            f"no GPU type meets the request (needs >= {job.min_gpu_memory_gb:g} GB GPU memory"
            f" among {', '.join(sorted(asked))})"
        )
    if not timeline.eligible(position):
        if not set(types) & present:
            return f"no node has GPU type {', '.join(types)}"
        draining = [
            topo.node.id
            for topo in timeline.topologies
            if topo.node.draining and topo.node.gpu_type in types and node_can_host(job, topo)
        ]
        if draining:
            return f"every node that could hold it is draining: {', '.join(draining)}"
        need = "NVLink-connected " if job.topology == "nvlink" and job.gpu_count > 1 else ""
        what = f"{job.gpu_count} {need}GPUs"
        largest = max(
            (popcount(t.healthy) for t in timeline.topologies if t.node.gpu_type in types),
            default=0,
        )
        if job.topology != "node" and not job.cpu_only and job.gpu_count > largest:
            together = {
                "nvlink": "on whole NVLink-connected nodes of one size in one rack",
                "rack": "in one rack",
                "any": "in the cluster",
            }[job.topology]
            return f"the healthy nodes of type {', '.join(types)} cannot hold {what} {together}"
        return f"no healthy node of type {', '.join(types)} can hold {what}"
    tenant = instance.tenants.get(job.tenant)
    if tenant is not None and tenant.gpu_quota is not None and tenant.gpu_quota < job.gpu_count:
        return (
            f"tenant {job.tenant} quota {tenant.gpu_quota} GPUs is below the job's {job.gpu_count}"
        )
    free = timeline.total_free()
    return (
        f"no room for {job.gpu_count} GPUs before the horizon ({instance.policy.horizon_s} s);"
        f" {free} GPUs free now"
    )
