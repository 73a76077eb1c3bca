"""Soft preferences priced into placements.

Soft preferences (a ``zone``, ``preferred_gpu_types``, ``prefer_nvlink``)
are priced, not required: a job that has one takes the placement whose
first criterion (its end; its start under ``best-fit`` and ``frag-aware``)
plus the penalty of the preferences it drops, in seconds, is least. The
search (:meth:`whale_opt.placement.search.PlacementSearch.best_placement`)
tries the best placement that honours each combination of them (:func:`tries`)
and the best unrestricted one, and prices each (:func:`penalty_s`). Only jobs
that have such a preference pay for the extra searches. A type's GPU-second
price (:attr:`~whale_opt.problem_data.Policy.gpu_second_prices`) is added to
every placement's first criterion on that type (:func:`usage_s`).
"""

from __future__ import annotations

from whale_opt.decision import placement_price
from whale_opt.memo import MEMO_SIZE, IdentityMemo
from whale_opt.placement.records import Placement
from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.topology import nvlink_shaped


def priced_preferences(instance: Instance, position: int) -> tuple[str, ...]:
    """The soft preferences of job ``position`` that dropping would cost something."""
    job = instance.queue[position]
    policy = instance.policy
    out: list[str] = []
    if job.zone is not None and policy.zone_penalty_s > 0:
        out.append("zone")
    if job.preferred_gpu_types and policy.gpu_type_penalty_s > 0:
        out.append("gpu_type")
    wants_link = job.prefer_nvlink and job.topology != "nvlink" and job.gpu_count > 1
    if wants_link and policy.nvlink_penalty_s > 0:
        out.append("nvlink")
    return tuple(out)


def tries(
    instance: Instance, position: int, eligible: tuple[int, ...], wanted: tuple[str, ...]
) -> list[tuple[QueuedJob, frozenset[int] | None]]:
    """The searches that honour the preferences ``wanted`` of job ``position``, in
    order: per shape of the job (NVLink-shaped first when it prefers NVLink), the
    nodes of ``eligible`` in its zone and of a preferred type, in its zone, of a
    preferred type, and any node (None)."""
    job = instance.queue[position]
    honour: list[frozenset[int]] = []
    if "zone" in wanted or "gpu_type" in wanted:
        zones, types = _BY_ZONE_AND_TYPE.get(instance.nodes, lambda: _zones_and_types(instance))
        nodes = frozenset(eligible)
        if "zone" in wanted:
            honour.append(nodes & zones.get(job.zone, frozenset()))
        if "gpu_type" in wanted:
            liked = frozenset().union(*(types.get(t, ()) for t in job.preferred_gpu_types))
            honour.append(nodes & liked)
    restrictions: list[frozenset[int] | None] = []
    if len(honour) == 2:
        restrictions.append(honour[0] & honour[1])
    restrictions += [*honour, None]
    shapes = [nvlink_shaped(job), job] if "nvlink" in wanted else [job]
    return [(shape, allowed) for shape in shapes for allowed in restrictions]


Groups = dict[str | None, frozenset[int]]
_BY_ZONE_AND_TYPE: IdentityMemo[tuple[Groups, Groups]] = IdentityMemo(MEMO_SIZE)


def _zones_and_types(instance: Instance) -> tuple[Groups, Groups]:
    """The node positions of ``instance`` by zone and by GPU type."""
    zones: dict[str | None, set[int]] = {}
    types: dict[str | None, set[int]] = {}
    for n, node in enumerate(instance.nodes):
        zones.setdefault(node.zone, set()).add(n)
        types.setdefault(node.gpu_type, set()).add(n)
    return (
        {zone: frozenset(ns) for zone, ns in zones.items()},
        {name: frozenset(ns) for name, ns in types.items()},
    )


def penalty_s(instance: Instance, position: int, placement: Placement) -> float:
    """What ``placement`` of job ``position`` costs in dropped preferences and
    its type's GPU-second price, in seconds of the job's (weighted) end."""
    per_node = dict(zip(placement.nodes, placement.counts, strict=True))
    masks = dict(zip(placement.nodes, placement.masks, strict=True)) if placement.masks else None
    return placement_price(instance, position, per_node, masks) / instance.weights[position]


def usage_s(instance: Instance, position: int, gpu_type: str) -> float:
    """The GPU-second price of job ``position`` on ``gpu_type``, in seconds of its
    (weighted) end: what a placement there adds to its key."""
    price = instance.usage_price(position, gpu_type)
    return price / instance.weights[position] if price else 0.0
