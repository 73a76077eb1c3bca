"""The outcome of a round: per-job actions, the objective, bound and status.

The objective lives here, in one place, so that every solver, policy and the
checker price a decision the same way (FORMAT.md, decision@1):

    objective = sum over queued jobs of weight x end
              + sum over soft preferences a placement drops of
                weight x its price (policy.zone_penalty_s, gpu_type_penalty_s,
                nvlink_penalty_s; see :mod:`whale_opt.preferences`)
              + sum over placed queued jobs of GPUs x duration x the
                price of a GPU-second on their type (policy.gpu_second_prices;
                none by default)
              + sum over preempted running jobs of
                weight x (work since its last checkpoint + checkpoint_s)

where a deferred job ends at ``horizon_s`` + its shortest duration (with
GPU-second prices: past the horizon on the type where its weighted run plus
its price is least; it runs somewhere in the end) and
``weight`` is the effective weight (the job's weight x its priority class's
factor x aging, :attr:`Instance.weights`). A preempted job is priced by the
work it loses and its checkpoint/restore time; it goes back to the queue with
its remaining work, where the next round prices its wait like any other.

A lost job (running on hardware that failed, :attr:`Instance.lost`) costs
nothing in the round that reports it: its loss happened before the round,
and no decision can change it. Every decision reports it ``lost`` with what
failed (:func:`lost_decisions`); the round API requeues it from its last
checkpoint, where the next round prices its wait like a preempted job's.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from whale_opt import preferences
from whale_opt.memo import IdentityMemo
from whale_opt.problem_data import FieldError, Instance
from whale_opt.topology import NodeTopology, eligible_nodes, node_topologies, popcount


class Action(enum.StrEnum):
    """What happens to a job this round."""

    START = "start"
    PLANNED = "planned"
    DEFERRED = "deferred"
    KEEP = "keep"
    PREEMPT = "preempt"
    LOST = "lost"


_E = TypeVar("_E", bound=enum.StrEnum)


def _member(kind: type[_E], path: str, value: Any) -> _E:
    """``value`` as a member of ``kind`` (its value given as a string, or the member).

    Raises
    ------
    FieldError
        ``value`` is no member's value.
    """
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(member.value for member in kind)
        raise FieldError(path, value, f"must be one of {names}") from None


class Status(enum.StrEnum):
    """How the round's solve ended."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    GREEDY_FALLBACK = "greedy-fallback"
    INFEASIBLE_INPUT = "infeasible-input"


@dataclass(frozen=True)
class JobDecision:
    """One job's action.

    ``gpus`` for ``start`` (several shares may name one GPU; a CPU-only job
    names no GPU and its one node in ``nodes``); ``nodes`` and ``node_gpus``
    (GPUs per node, same order) for ``planned``; ``reason`` for ``deferred`` and ``lost`` (what
    failed under a lost job); ``dropped`` the soft
    preferences its placement drops, as (preference, reason) pairs. Times are
    seconds from the instance's now.
    """

    id: str
    action: Action
    gpu_ids: tuple[str, ...] = ()
    start_s: int | None = None
    end_s: int | None = None
    nodes: tuple[str, ...] = ()
    node_gpus: tuple[int, ...] = ()
    reason: str | None = None
    dropped: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # A policy may build its records with plain strings ("start") and lists.
        # Everything downstream (the checker, the scheduler, the writer) compares
        # actions by identity and hashes the sequences: normalised here, once.
        if type(self.action) is not Action:
            object.__setattr__(self, "action", _member(Action, "action", self.action))
        for name in ("gpu_ids", "nodes", "node_gpus"):
            if type(getattr(self, name)) is not tuple:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if type(self.dropped) is not tuple or any(type(d) is not tuple for d in self.dropped):
            object.__setattr__(self, "dropped", tuple(tuple(d) for d in self.dropped))

    @property
    def cpu_only_node(self) -> str | None:
        """The node a started CPU-only job names (it holds no GPU); None otherwise."""
        if self.action is Action.START and not self.gpu_ids and self.nodes:
            return self.nodes[0]
        return None


@dataclass(frozen=True)
class Decision:
    """A full round decision (decision@1).

    ``stats``: what the solver did this round, as named numbers (for CP-SAT:
    ``greedy_value``, ``search_value``, ``lns_rounds``, ``lns_optimal``,
    ``improved``, ``fallback``, ...); informational, solver-specific, empty
    when the solver reports none. Not part of the hash.
    """

    instance: str
    solver: str
    status: Status
    objective: float
    bound: float
    horizon_s: int
    jobs: tuple[JobDecision, ...]
    wall_s: float = 0.0
    stats: Mapping[str, float | int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # As JobDecision's: a status given as a string, the jobs as a list.
        if type(self.status) is not Status:
            object.__setattr__(self, "status", _member(Status, "status", self.status))
        if type(self.jobs) is not tuple:
            object.__setattr__(self, "jobs", tuple(self.jobs))

    @property
    def gap(self) -> float:
        """(objective - bound) / max(objective, 1), never below 0."""
        return max(0.0, (self.objective - self.bound) / max(self.objective, 1.0))

    @property
    def meets_bound(self) -> bool:
        """Whether the objective equals the bound (up to rounding): the decision is
        optimal for the round, however it was found."""
        return meets_bound(self.objective, self.bound)

    def job(self, job_id: str) -> JobDecision:
        """The decision about ``job_id``."""
        for item in self.jobs:
            if item.id == job_id:
                return item
        raise KeyError(job_id)

    def by_action(self, action: Action) -> tuple[JobDecision, ...]:
        """All job decisions with ``action``."""
        return tuple(item for item in self.jobs if item.action is action)

    def with_changes(self, **changes: Any) -> Decision:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)


def meets_bound(value: float, bound: float) -> bool:
    """Whether an objective ``value`` equals the lower ``bound`` up to rounding."""
    return (value - bound) / max(value, 1.0) <= 1e-9


def job_nodes(item: JobDecision) -> tuple[str, ...]:
    """The node ids a started or planned job occupies, in first-use order."""
    if item.action is Action.START:
        if not item.gpu_ids:
            return item.nodes
        seen: dict[str, None] = {}
        for gpu in item.gpu_ids:
            seen.setdefault(gpu.rpartition("/")[0], None)
        return tuple(seen)
    return item.nodes


def job_node_positions(instance: Instance, item: JobDecision) -> tuple[int, ...]:
    """The positions in ``instance`` of the nodes a started or planned job occupies
    (:func:`job_nodes`; a name ``instance`` does not know raises KeyError)."""
    return tuple(instance.node_index[node] for node in job_nodes(item))


def placement_of(
    instance: Instance, item: JobDecision, gpus: int
) -> tuple[dict[int, int], dict[int, int] | None]:
    """GPUs per node position and, for a start, GPU bit masks per node, of a
    job of ``gpus`` GPUs.

    Empty when the job is not placed or names unknown nodes or GPUs (the
    checker reports those).
    """
    try:
        if item.action is Action.START:
            masks: dict[int, int] = {}
            for gpu in item.gpu_ids:
                ref = instance.parse_gpu(gpu)
                masks[ref.node] = masks.get(ref.node, 0) | (1 << ref.index)
            host = item.cpu_only_node
            if host is not None and host in instance.node_index:
                masks[instance.node_index[host]] = 0  # CPU-only: its node, no GPU
            return {n: m.bit_count() for n, m in masks.items()}, masks
    except FieldError:
        return {}, None
    if item.action is Action.PLANNED and all(n in instance.node_index for n in item.nodes):
        per_node: dict[int, int] = {}
        for node_id, count in zip(item.nodes, planned_counts(item, gpus), strict=False):
            per_node[instance.node_index[node_id]] = count
        return per_node, None
    return {}, None


def planned_counts(item: JobDecision, gpus: int) -> tuple[int, ...]:
    """GPUs per node of a planned job: ``node_gpus``, else ``gpus`` split evenly
    over ``nodes`` (``node_gpus`` is optional in decision@1)."""
    if item.node_gpus:
        return item.node_gpus
    base, extra = divmod(gpus, max(len(item.nodes), 1))
    return tuple(base + (1 if k < extra else 0) for k in range(len(item.nodes)))


def dropped_preferences(instance: Instance, position: int, item: JobDecision) -> tuple[str, ...]:
    """The soft preferences queued job ``position``'s placement in ``item`` drops."""
    job = instance.queue[position]
    if not (job.zone or job.preferred_gpu_types or job.prefer_nvlink):
        return ()
    per_node, masks = placement_of(instance, item, job.gpu_count)
    return preferences.dropped(instance, position, per_node, masks)


def placement_penalty(instance: Instance, position: int, item: JobDecision) -> float:
    """Soft-preference penalty of queued job ``position`` placed as ``item`` says,
    plus the price of its GPU-seconds on their type (:meth:`Instance.usage_price`)."""
    names = dropped_preferences(instance, position, item)
    penalty = preferences.price(instance, position, names) if names else 0.0
    if instance.policy.priced:
        gpu_type = placed_type(instance, item)
        if gpu_type is not None and gpu_type in instance.durations[position]:
            penalty += instance.usage_price(position, gpu_type)
    return penalty


def placement_price(
    instance: Instance,
    position: int,
    per_node: Mapping[int, int],
    masks: Mapping[int, int] | None = None,
) -> float:
    """:func:`placement_penalty` of queued job ``position`` on ``per_node`` (node
    position -> GPUs there, not empty; ``masks`` the GPU bit masks when known):
    the preferences it drops and its type's GPU-second price."""
    names = preferences.dropped(instance, position, per_node, masks)
    price = preferences.price(instance, position, names) if names else 0.0
    gpu_type = instance.nodes[next(iter(per_node))].gpu_type
    return price + instance.usage_price(position, gpu_type)


def placed_type(instance: Instance, item: JobDecision) -> str | None:
    """The GPU type a start or plan puts its job on (None: none, or unknown GPUs or
    nodes, which the checker reports)."""
    try:
        if item.action is Action.START and item.gpu_ids:
            return instance.nodes[instance.parse_gpu(item.gpu_ids[0]).node].gpu_type
    except FieldError:
        return None
    if item.action is Action.PLANNED and item.nodes and item.nodes[0] in instance.node_index:
        return instance.nodes[instance.node_index[item.nodes[0]]].gpu_type
    return None


def deferred_cost(instance: Instance, position: int) -> float:
    """What deferring queued job ``position`` costs in the objective: its effective
    weight x :meth:`Instance.deferred_cost_end`, plus :func:`deferred_usage`."""
    base = instance.weights[position] * instance.deferred_cost_end(position)
    return base + deferred_usage(instance, position)


def deferred_usage(instance: Instance, position: int) -> float:
    """What deferring queued job ``position`` costs beyond its effective weight x
    :meth:`Instance.deferred_cost_end`, with GPU-second prices (0 without).

    It runs somewhere in the end, so deferred it is priced as run past the
    horizon on the type, among those of nodes that could ever hold it, where its
    weighted run plus its price is least: deferring is never a way around the
    price, nor cheaper than running on that type after the horizon.
    """
    if not instance.policy.priced:
        return 0.0
    return _USAGES.get(instance, lambda: _usages(instance))[position][0]


def least_usage(instance: Instance, position: int) -> float:
    """The least GPU-second price queued job ``position`` pays in any decision:
    its price on its cheapest type among those of nodes that could ever hold it
    (deferred, it pays at least that: :func:`deferred_usage`). Bounds add it."""
    if not instance.policy.priced:
        return 0.0
    return _USAGES.get(instance, lambda: _usages(instance))[position][1]


# Keyed by the instance and holding it: a round's, not a history's.
_USAGES: IdentityMemo[tuple[tuple[float, float], ...]] = IdentityMemo(2)


def _usages(instance: Instance) -> tuple[tuple[float, float], ...]:
    """:func:`deferred_usage` and :func:`least_usage` of every queued job (alike
    jobs share their types)."""
    topologies = node_topologies(instance)
    types_of: dict[tuple[object, ...], frozenset[str]] = {}
    out: list[tuple[float, float]] = []
    for k, job in enumerate(instance.queue):
        shape: tuple[object, ...] = (instance.eligible_types[k], job.gpu_count, job.topology)
        shape += (job.gpu_milli, job.cpu, job.memory_gb)
        if shape not in types_of:
            types_of[shape] = _runnable_types(instance, k, topologies)
        weight = instance.weights[k]
        durations = instance.durations[k]
        prices = {t: instance.usage_price(k, t) for t in types_of[shape]}
        if not prices:
            out.append((0.0, 0.0))  # it can run nowhere: no price to dodge
            continue
        least = min(weight * durations[t] + price for t, price in prices.items())
        plain = weight * instance.deferred_cost_end(k)
        deferred = max(0.0, weight * instance.policy.horizon_s + least - plain)
        out.append((deferred, min(prices.values())))
    return tuple(out)


def _runnable_types(
    instance: Instance, position: int, topologies: tuple[NodeTopology, ...]
) -> frozenset[str]:
    """The GPU types queued job ``position`` could run on in an empty cluster, as
    far as each type's nodes alone tell: eligible nodes (:func:`eligible_nodes`)
    whose host CPU and memory take the job's share for the GPUs they would hold,
    enough of them on one node, in one rack or in all, as its topology asks. A
    necessary condition (a superset of the types it can really run on): bounds
    may take their least price."""
    job = instance.queue[position]
    gpus = job.gpu_count
    caps: dict[str, list[tuple[str | None, int]]] = {}  # (rack, or None: a node alone)
    for n in eligible_nodes(instance, position, topologies):
        node = instance.nodes[n]
        cap = popcount(topologies[n].healthy) if gpus else 1
        for need, have in ((job.cpu, node.cpu), (job.memory_gb, node.memory_gb)):
            if need:
                # A node holding g of the job's GPUs hosts g / gpus of its CPU and memory.
                cap = min(cap, math.floor((have + 1e-9) * max(gpus, 1) / need))
        if cap > 0:
            # Gangs that may span nodes add up their nodes' room (a member of a
            # multi-node NVLink gang takes its node whole); other jobs take one node.
            member = job.topology == "nvlink" and gpus > topologies[n].size
            spans = member or (job.topology in ("any", "rack") and gpus > 1)
            room = (node.rack if spans else None, min(cap, max(gpus, 1)))
            caps.setdefault(node.gpu_type, []).append(room)
    out = []
    for gpu_type, held in caps.items():
        alone = max((cap for rack, cap in held if rack is None), default=0)
        racks: dict[str, int] = {}
        for rack, cap in held:
            if rack is not None:
                racks[rack] = racks.get(rack, 0) + cap
        spread = max(racks.values(), default=0) if job.topology == "rack" else sum(racks.values())
        if max(alone, spread) >= max(gpus, 1):
            out.append(gpu_type)
    return frozenset(out)


def preemption_cost(instance: Instance, running_position: int) -> float:
    """The price of preempting running job ``running_position``: its effective
    weight x (work since its last checkpoint + checkpoint/restore time)."""
    job = instance.running[running_position]
    return instance.running_weights[running_position] * (job.lost_on_preempt_s + job.checkpoint_s)


def with_dropped(instance: Instance, jobs: tuple[JobDecision, ...]) -> tuple[JobDecision, ...]:
    """``jobs`` with each placed queued job's dropped preferences and their reasons."""
    position = instance.queue_index
    out = []
    for item in jobs:
        k = position.get(item.id)
        pairs: tuple[tuple[str, str], ...] = ()
        if k is not None:
            names = dropped_preferences(instance, k, item)
            pairs = tuple((name, preferences.reason(instance, k, name)) for name in names)
        out.append(replace(item, dropped=pairs) if pairs != item.dropped else item)
    return tuple(out)


def lost_decisions(instance: Instance) -> tuple[JobDecision, ...]:
    """The ``lost`` item of every lost job of ``instance``, with what failed as
    its reason ("node n3 is down", "GPU n3/5 failed")."""
    return tuple(
        JobDecision(job.id, Action.LOST, reason=instance.lost_reason(job)) for job in instance.lost
    )


def objective(instance: Instance, jobs: tuple[JobDecision, ...] | list[JobDecision]) -> float:
    """The decision@1 objective of ``jobs`` on ``instance`` (see module docstring).

    Queued jobs missing from ``jobs`` are priced as deferred, so a partial
    decision is never cheaper than a complete one. Lost jobs cost nothing.
    """
    by_id = {item.id: item for item in jobs}
    total = 0.0
    for position, job in enumerate(instance.queue):
        weight = instance.weights[position]
        item = by_id.get(job.id)
        if item is None or item.action is Action.DEFERRED or item.end_s is None:
            total += deferred_cost(instance, position)
            continue
        total += weight * item.end_s
        total += placement_penalty(instance, position, item)
    for position, running in enumerate(instance.running):
        item = by_id.get(running.id)
        if item is not None and item.action is Action.PREEMPT:
            total += preemption_cost(instance, position)
    return total
