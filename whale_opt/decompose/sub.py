"""A pool as an instance of its own: its nodes, jobs, quotas, guarantees and
preemption share."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from whale_opt.decompose.cut import Pool
from whale_opt.memo import IdentityMemo
from whale_opt.problem_data import Instance, Node, Tenant, tenant_guarantee
from whale_opt.rules import held_by_tenant, preemptible_now


def quota_shares(instance: Instance, parts: list[Pool]) -> dict[str, list[int]]:
    """Per tenant with a quota, each pool's part of it, in proportion to the GPUs its
    jobs ask there (parts add up to the quota)."""
    shares: dict[str, list[int]] = {}
    for name, tenant in instance.tenants.items():
        if tenant.gpu_quota is None:
            continue
        asks = [
            sum(instance.queue[k].gpu_count for k in p.jobs if instance.queue[k].tenant == name)
            for p in parts
        ]
        shares[name] = _proportional(tenant.gpu_quota, asks)
    return shares


def _proportional(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (the remainder to the largest)."""
    whole = sum(weights)
    split = [total * w // whole if whole else 0 for w in weights]
    if whole:
        split[max(range(len(weights)), key=lambda p: weights[p])] += total - sum(split)
    return split


def _pool_of_running(instance: Instance, parts: list[Pool]) -> dict[int, int | None]:
    """Running position -> the pool holding all its GPUs (None when it spans pools)."""
    where = {k: p for p, pool in enumerate(parts) for k in pool.nodes}
    out: dict[int, int | None] = {}
    for r, job in enumerate(instance.running):
        held = {where[node] for node in instance.held_nodes(job)}
        out[r] = held.pop() if len(held) == 1 else None
    return out


def preemption_shares(instance: Instance, parts: list[Pool]) -> list[int | None]:
    """Each pool's part of ``policy.max_preemptions``, in proportion to the running
    jobs it may preempt (None: no cap)."""
    cap = instance.policy.max_preemptions
    if cap is None:
        return [None] * len(parts)
    home = _pool_of_running(instance, parts)
    open_in = [0] * len(parts)
    for r, pool in home.items():
        if pool is not None and preemptible_now(instance, r):
            open_in[pool] += 1
    return list(_proportional(cap, open_in))


def running_gpus_by_pool(instance: Instance, parts: list[Pool]) -> list[dict[int, tuple[str, ...]]]:
    """Per pool, each running job (by position) holding GPUs there, with those GPUs,
    and each CPU-only running job on a node there, with none (read once for all
    pools: each pool's own view of the running jobs)."""
    where = {k: p for p, pool in enumerate(parts) for k in pool.nodes}
    held: list[dict[int, list[str]]] = [defaultdict(list) for _ in parts]
    for r, job in enumerate(instance.running):
        if job.node is not None:
            pool = where.get(instance.node_index[job.node])
            if pool is not None:
                held[pool][r] = []
        for gpu in job.gpu_ids:
            pool = where.get(instance.parse_gpu(gpu).node)
            if pool is not None:
                held[pool][r].append(gpu)
    return [{r: tuple(gpus) for r, gpus in sorted(pool.items())} for pool in held]


def pool_tenants(
    instance: Instance,
    pool: Pool,
    quotas: dict[str, int],
    inside_gpus: dict[int, tuple[str, ...]] | None = None,
) -> dict[str, Tenant]:
    """The tenants as ``pool`` sees them: its part of each quota, and each guarantee
    lowered by the GPUs the tenant holds outside the pool, so that inside the pool a
    tenant is above or below its guarantee exactly when it is on the whole cluster
    (the merge re-checks what a quota part below a shifted guarantee may bend).

    ``inside_gpus`` is the pool's entry of :func:`running_gpus_by_pool` (None:
    read here).
    """
    if inside_gpus is None:
        inside_gpus = running_gpus_by_pool(instance, [pool])[0]
    held = held_by_tenant(instance)
    inside: dict[str, int] = defaultdict(int)
    for r, gpus in inside_gpus.items():
        inside[instance.running[r].tenant] += len(gpus)
    out: dict[str, Tenant] = {}
    for name in {*instance.tenants, *quotas}:
        quota = quotas.get(name, instance.tenants[name].gpu_quota)
        guarantee = None
        if name in instance.tenants and instance.tenants[name].guaranteed_gpus is not None:
            shifted = max(0, tenant_guarantee(instance, name) - (held[name] - inside[name]))
            guarantee = shifted if quota is None else min(shifted, quota)
        out[name] = Tenant(name, quota, guarantee)
    return out


def sub_instance(
    instance: Instance,
    pool: Pool,
    quotas: dict[str, int],
    max_preemptions: int | None = None,
    inside_gpus: dict[int, tuple[str, ...]] | None = None,
) -> Instance:
    """``pool`` as an instance of its own: running jobs cut to its GPUs (those that
    span pools may not be preempted), quota and guarantee parts, priority classes,
    a part of the preemption cap.

    ``inside_gpus`` is the pool's entry of :func:`running_gpus_by_pool` (None:
    read here).
    """
    if inside_gpus is None:
        inside_gpus = running_gpus_by_pool(instance, [pool])[0]
    running = []
    for r, mine in inside_gpus.items():
        job = instance.running[r]
        if len(mine) == len(job.gpu_ids):  # wholly in the pool: as it is
            running.append(job)
            continue
        share = len(mine) / len(job.gpu_ids) if job.gpu_ids else 1.0  # CPU-only: all here
        running.append(
            replace(
                job,
                gpu_ids=mine,
                cpu=job.cpu * share,
                memory_gb=job.memory_gb * share,
                preemptible=job.preemptible and len(mine) == len(job.gpu_ids),
            )
        )
    queue = tuple(instance.queue[k] for k in pool.jobs)
    gpu_types = (
        {t: instance.gpu_types[t] for t in {instance.nodes[k].gpu_type for k in pool.nodes}}
        | {t: instance.gpu_types[t] for job in queue for t in job.gpu_types}
        | {t: instance.gpu_types[t] for job in queue for t, _ in job.duration_by_type_s}
        | {t: instance.gpu_types[t] for job in queue for t in job.preferred_gpu_types}
    )
    return Instance(
        name=instance.name,
        gpu_types=gpu_types,
        nodes=_pool_nodes(instance, pool.nodes),
        running=tuple(running),
        queue=queue,
        tenants=pool_tenants(instance, pool, quotas, inside_gpus),
        policy=replace(instance.policy.for_types(gpu_types), max_preemptions=max_preemptions),
        now=instance.now,
        priority_classes=instance.priority_classes,
    )


# A pool's node tuple, the same one round after round while the cluster's is (so
# what its sub-instances derive from their nodes is found again by identity).
_POOL_NODES: IdentityMemo[dict[tuple[int, ...], tuple[Node, ...]]] = IdentityMemo(4)


def _pool_nodes(instance: Instance, positions: tuple[int, ...]) -> tuple[Node, ...]:
    """The nodes at ``positions`` of ``instance``, as a tuple shared between rounds."""
    tuples = _POOL_NODES.get(instance.nodes, dict)
    if positions not in tuples:
        tuples[positions] = tuple(instance.nodes[k] for k in positions)
    return tuples[positions]
