"""Soft preferences: which a placement drops, what that costs, and why.

A queued job may prefer a zone (``zone``), GPU types
(``preferred_gpu_types``) and an NVLink-connected placement
(``prefer_nvlink``) without requiring them. A placement that drops one pays
the job's effective weight times the policy's price for it
(``zone_penalty_s``, ``gpu_type_penalty_s``, ``nvlink_penalty_s``). The
objective (:mod:`whale_opt.decision`), every solver and the checker read the
rule from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from whale_opt.problem_data import Instance
from whale_opt.topology import (
    eligible_nodes,
    node_can_host,
    node_topologies,
    nvlink_breaches,
    nvlink_shaped,
)

PREFERENCES = ("zone", "gpu_type", "nvlink")


def dropped(
    instance: Instance,
    position: int,
    per_node: Mapping[int, int],
    masks: Mapping[int, int] | None = None,
) -> tuple[str, ...]:
    """The preferences queued job ``position`` drops when placed on ``per_node``
    (node position -> GPUs there; ``masks`` the GPU bit masks when known)."""
    if not per_node:
        return ()
    job = instance.queue[position]
    nodes = [instance.nodes[n] for n in per_node]
    out: list[str] = []
    if job.zone is not None and any(node.zone != job.zone for node in nodes):
        out.append("zone")
    if job.preferred_gpu_types and nodes[0].gpu_type not in job.preferred_gpu_types:
        out.append("gpu_type")
    if job.prefer_nvlink and job.topology != "nvlink" and job.gpu_count > 1:
        topologies = node_topologies(instance)
        if nvlink_breaches(
            instance,
            topologies,
            job,
            dict(per_node),
            None if masks is None else dict(masks),
        ):
            out.append("nvlink")
    return tuple(out)


def price(instance: Instance, position: int, names: tuple[str, ...]) -> float:
    """The penalty of dropping ``names`` for queued job ``position``."""
    policy = instance.policy
    seconds = {
        "zone": policy.zone_penalty_s,
        "gpu_type": policy.gpu_type_penalty_s,
        "nvlink": policy.nvlink_penalty_s,
    }
    return instance.weights[position] * sum(seconds[name] for name in names)


def reason(instance: Instance, position: int, name: str) -> str:
    """Why a solver may have dropped preference ``name`` of job ``position``, in words.

    It tells apart a preference no eligible hardware can honour from one
    that was priced out: honouring it would have delayed this or other work
    by more than the penalty.
    """
    job = instance.queue[position]
    topologies = node_topologies(instance)
    eligible = [topologies[k] for k in eligible_nodes(instance, position, topologies)]
    usable = [topo.node for topo in eligible]
    cost = price(instance, position, (name,))
    if name == "zone":
        if not any(node.zone == job.zone for node in usable):
            return f"no eligible healthy node in zone {job.zone}"
        wanted = f"zone {job.zone}"
    elif name == "gpu_type":
        if not any(node.gpu_type in job.preferred_gpu_types for node in usable):
            return f"no eligible healthy node of {', '.join(job.preferred_gpu_types)}"
        wanted = ", ".join(job.preferred_gpu_types)
    else:
        wanted = "NVLink-connected GPUs"
        shaped = nvlink_shaped(job)
        if not any(node_can_host(shaped, topo) for topo in eligible):
            return "no eligible healthy node has an NVLink-connected block that large"
    return (
        f"{wanted} busy or taken by better uses: honouring it would cost more than"
        f" its penalty ({cost:g} weighted s)"
    )
