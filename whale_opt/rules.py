"""Placement rules that the checker enforces and the solvers must respect.

Only rules that need more than the data model live here; the checker
(:mod:`whale_opt.check`) is their judge, the policies their users.

**Release rule.** GPU ids are not reserved for the future, so which GPUs a
node will have free, and whether they will be NVLink-linked, is unknown
until something on it ends. A planned NVLink job (2+ GPUs, one node) on a
node whose healthy GPUs are not all linked therefore starts no earlier than
the first end of a job on that node (running, started or planned).

**Preemption rules.** A running job may be preempted only when the policy
allows preemption, the job and its priority class are preemptible and it has
run ``policy.min_run_s``; at most ``policy.max_preemptions`` a round; and
only for a job started now on at least one of its GPUs that may displace it:
one of a higher priority rank, or one that reclaims its tenant's guarantee
from a tenant above its own (borrowed GPUs): the reclaiming tenant, with
the job, stays within its ``guaranteed_gpus``, so GPUs never go back and
forth between two tenants. A preemption that frees GPUs nobody starts on is
pure loss and is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from whale_opt.decision import Action, JobDecision
from whale_opt.problem_data import (
    FieldError,
    Instance,
    QueuedJob,
    RunningJob,
    class_rank,
    tenant_guarantee,
)
from whale_opt.topology import node_topologies


def partly_linked(instance: Instance, node_pos: int) -> bool:
    """Whether some pair of the node's healthy GPUs has no NVLink."""
    return not node_topologies(instance)[node_pos].clique


def waits_for_release(instance: Instance, job: QueuedJob, nodes: tuple[int, ...]) -> bool:
    """Whether ``job`` planned on ``nodes`` falls under the release rule."""
    return (
        job.topology == "nvlink"
        and job.gpu_count >= 2
        and len(nodes) == 1
        and partly_linked(instance, nodes[0])
    )


def _nodes_of(instance: Instance, item: JobDecision) -> tuple[int, ...] | None:
    try:
        if item.action is Action.START and item.cpu_only_node is not None:
            return (instance.node_index[item.cpu_only_node],)
        if item.action is Action.START:
            return tuple(dict.fromkeys(instance.parse_gpu(g).node for g in item.gpu_ids))
    except (FieldError, KeyError):
        return None
    if item.action is Action.PLANNED and all(n in instance.node_index for n in item.nodes):
        return tuple(instance.node_index[n] for n in item.nodes)
    return None


def unreleased_plans(instance: Instance, items: Iterable[JobDecision]) -> dict[str, int | None]:
    """Planned jobs that break the release rule, with their node's first end (None: never).

    Items naming unknown jobs, nodes or GPUs are skipped (the checker reports them).
    """
    items = list(items)
    preempted = {item.id for item in items if item.action is Action.PREEMPT}
    first_end: dict[int, int] = {}

    def ends(nodes: Iterable[int], end: int) -> None:
        for node in nodes:
            if end > 0:
                first_end[node] = min(first_end.get(node, end), end)

    for held in instance.running:
        if held.id not in preempted:
            ends(instance.held_nodes(held), held.remaining_s)  # CPU-only jobs end there too
    placed = []
    for item in items:
        nodes = _nodes_of(instance, item)
        if nodes is not None and item.end_s is not None:
            ends(nodes, item.end_s)
            placed.append((item, nodes))
    queued = {job.id: job for job in instance.queue}
    broken: dict[str, int | None] = {}
    for item, nodes in placed:
        job = queued.get(item.id)
        if job is None or item.action is not Action.PLANNED:
            continue
        if waits_for_release(instance, job, nodes):
            release = first_end.get(nodes[0])
            if release is None or (item.start_s or 0) < release:
                broken[item.id] = release
    return broken


def preemptible_now(instance: Instance, running_position: int) -> bool:
    """Whether running job ``running_position`` may be preempted this round at all
    (whole-GPU jobs only: a share of a GPU or a CPU-only job is never preempted)."""
    job = instance.running[running_position]
    policy = instance.policy
    return (
        policy.allow_preemption
        and not job.shares
        and job.node is None
        and job.preemptible
        and instance.priority_classes[job.priority_class].preemptible
        and -job.started_at >= policy.min_run_s
    )


def held_by_tenant(instance: Instance) -> Counter[str]:
    """GPUs each tenant's running jobs hold now."""
    held: Counter[str] = Counter()
    for job in instance.running:
        held[job.tenant] += len(job.gpu_ids)
    return held


def may_displace(
    instance: Instance, victim: RunningJob, job: QueuedJob, held: Mapping[str, int]
) -> bool:
    """Whether starting ``job`` justifies preempting ``victim`` (``held``: GPUs per tenant now).

    A higher priority rank displaces a lower one; a job whose tenant, with
    it, stays within its guarantee reclaims from a tenant above its own. A
    share of a GPU or a CPU-only job displaces nothing (whole GPUs are what a
    preemption frees).
    """
    if job.shares or job.cpu_only:
        return False
    if class_rank(instance, job) > class_rank(instance, victim):
        return True
    return (
        job.tenant != victim.tenant
        and held.get(victim.tenant, 0) > tenant_guarantee(instance, victim.tenant)
        and held.get(job.tenant, 0) + job.gpu_count <= tenant_guarantee(instance, job.tenant)
    )


def preemption_problems(instance: Instance, items: Iterable[JobDecision]) -> list[tuple[str, str]]:
    """Preemptions that break the rules above, as (job id, message) pairs."""
    items = list(items)
    running = instance.running_index
    victims = [item.id for item in items if item.action is Action.PREEMPT and item.id in running]
    if not victims:
        return []
    problems: list[tuple[str, str]] = []
    cap = instance.policy.max_preemptions
    if cap is not None and len(victims) > cap:
        problems.append((victims[cap], f"{len(victims)} preemptions exceed max_preemptions {cap}"))
    queued = {job.id: job for job in instance.queue}
    users: dict[str, list[QueuedJob]] = {}
    for item in items:
        if item.action is Action.START and item.id in queued:
            for gpu in item.gpu_ids:
                users.setdefault(gpu, []).append(queued[item.id])
    held = held_by_tenant(instance)
    policy = instance.policy
    for job_id in victims:
        k = running[job_id]
        victim = instance.running[k]
        if not policy.allow_preemption:
            problems.append((job_id, "policy.allow_preemption is off"))
            continue
        if not victim.preemptible:
            problems.append((job_id, "is not preemptible"))
        elif not instance.priority_classes[victim.priority_class].preemptible:
            problems.append((job_id, f"priority class {victim.priority_class} is not preemptible"))
        elif -victim.started_at < policy.min_run_s:
            problems.append(
                (
                    job_id,
                    f"has run {-victim.started_at} s, less than min_run_s {policy.min_run_s}",
                )
            )
        elif not any(
            may_displace(instance, victim, job, held)
            for gpu in victim.gpu_ids
            for job in users.get(gpu, ())
        ):
            problems.append(
                (
                    job_id,
                    "no job started on its GPUs outranks it or reclaims a guarantee from its"
                    " tenant",
                )
            )
    return problems
