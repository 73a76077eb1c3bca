"""Large rounds split into pools solved apart (in parallel), then merged.

:func:`whale_opt.solve.solve` splits a round when the cluster is large or
its queue too long for the time limit (see there). Pools are whole racks of
one GPU type, each at most ``max_gpus`` GPUs. Every queued job goes to one
pool it can run in (highest priority first, to the least loaded pool
relative to its speed-weighted capacity); running jobs stay where they run.
Each pool is an ordinary instance, solved by any policy; the merged decision
is valid for the whole cluster because pools share no GPU. Pools carry the
priority classes, guaranteed shares shifted so that every tenant is above or
below its guarantee exactly as on the whole cluster, a share of
``max_preemptions``, and running jobs that span pools become unpreemptible
there. A tenant's quota is split over the pools in proportion to what its
jobs ask in each; at merge time the preemption rules are checked on the
whole decision (a preemption that breaks one is undone, with the starts and
plans on the victim's nodes while it runs), the tenant's jobs against the
whole quota in start order, and the jobs taken out are list-scheduled again
on the whole cluster.

The merged decision's bound is the analytic bound of the whole instance
(the trivial one when that would not fit the time limit), so the gap stays
honest about what the split may cost.

A pool whose solve is lost (its worker died, or it raised) or has not
answered by :data:`POOL_WAIT` of the time limit is decided here by the WSPT
greedy instead; the others keep their solver's decision. The decision then
says so: status ``greedy-fallback``, and in its stats ``pools``,
``pools_fallback`` and one ``fallback_pool_<k>`` per such pool (``k`` its
position in :func:`pools`, the value its queued jobs); a warning names the
pool's nodes and what went wrong.

Rounds of a replay or a live scheduler mostly see the same nodes: the cut
into node sets and which pools each job shape may use are kept from the
last round while its node records are the same objects.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, replace

from whale_opt.bounds import reported_bound, trivial_bound
from whale_opt.budget import bound_fits, pool_limits, round_cost
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.options import SolveOptions
from whale_opt.placement.profile import Profile
from whale_opt.placement.reasons import deferral_reason
from whale_opt.placement.records import to_job_decision, to_placement
from whale_opt.placement.serial import assemble
from whale_opt.placement.state import ClusterState
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance, Tenant, tenant_guarantee
from whale_opt.rules import held_by_tenant, preemptible_now, preemption_problems, unreleased_plans
from whale_opt.topology import eligible_nodes, node_topologies, rack_groups

DEFAULT_MAX_GPUS = 512
POOL_SHARE = 0.5  # of the time limit the pools get (the rest: split, merge, bound)
POOL_WAIT = 0.8  # of the time limit: pools not back by then fall back to the greedy

log = logging.getLogger("whale_opt")


@dataclass(frozen=True)
class Pool:
    """Node positions of one pool and the queued jobs assigned to it."""

    nodes: tuple[int, ...]
    jobs: tuple[int, ...]


def pools(instance: Instance, max_gpus: int = DEFAULT_MAX_GPUS) -> list[Pool]:
    """Cut the cluster into pools and assign every servable queued job to one."""
    return _assign(instance, _node_view(instance, max_gpus))


class _NodeView:
    """What the cut depends on and that changes only with the node records: the
    pools' node sets, their healthy GPUs, and the nodes each job shape may use.

    Node records are replaced, never changed, so a view stays right while a
    round's nodes are the very objects it was made from (a replay's rounds
    share them until hardware fails or is repaired).
    """

    def __init__(self, instance: Instance, max_gpus: int) -> None:
        self.nodes = instance.nodes
        self.gpu_types = instance.gpu_types
        self.max_gpus = max_gpus
        self.node_sets = _node_sets(instance, max_gpus)
        self.where = {k: p for p, nodes in enumerate(self.node_sets) for k in nodes}
        self.healthy = [
            sum(len(instance.nodes[k].healthy_indices) for k in nodes) or 1
            for nodes in self.node_sets
        ]
        self.topologies = node_topologies(instance)
        # The pools a job could run in depend only on its shape: its eligible types,
        # GPUs, topology need and whether it needs a GPU at all (see node_can_host).
        self.reach: dict[tuple[tuple[str, ...], int, str, bool], set[int]] = {}

    def fits(self, instance: Instance, max_gpus: int) -> bool:
        """Whether this view is of ``instance``'s nodes (the same objects)."""
        nodes = instance.nodes
        return (
            max_gpus == self.max_gpus
            and len(nodes) == len(self.nodes)
            and all(a is b for a, b in zip(nodes, self.nodes, strict=True))
            and (instance.gpu_types is self.gpu_types or instance.gpu_types == self.gpu_types)
        )

    def pools_of(self, instance: Instance, position: int) -> set[int]:
        """The pools queued job ``position`` could run in."""
        job = instance.queue[position]
        shape = (instance.eligible_types[position], job.gpu_count, job.topology, job.cpu_only)
        if shape not in self.reach:
            eligible = eligible_nodes(instance, position, self.topologies)
            self.reach[shape] = {self.where[n] for n in eligible}
        return self.reach[shape]


_last_view: list[_NodeView] = []  # the last round's view (one: rounds come one by one)


def _node_view(instance: Instance, max_gpus: int) -> _NodeView:
    """The view of ``instance``'s nodes: the last round's when its nodes are unchanged."""
    if _last_view and _last_view[0].fits(instance, max_gpus):
        return _last_view[0]
    view = _NodeView(instance, max_gpus)
    _last_view[:] = [view]
    return view


def _node_sets(instance: Instance, max_gpus: int) -> list[list[int]]:
    """Whole racks of one GPU type, in order, gathered up to ``max_gpus`` GPUs a set."""
    node_sets: list[list[int]] = []
    by_type: dict[str, list[list[int]]] = defaultdict(list)
    for (gpu_type, _), members in sorted(rack_groups(instance).items()):
        by_type[gpu_type].append(members)
    for rack_lists in by_type.values():
        current: list[int] = []
        held = 0
        for members in rack_lists:
            size = sum(instance.nodes[k].gpu_count for k in members)
            if current and held + size > max_gpus:
                node_sets.append(current)
                current, held = [], 0
            current = current + members
            held += size
        if current:
            node_sets.append(current)
    return node_sets


def _assign(instance: Instance, view: _NodeView) -> list[Pool]:
    """Each job, highest priority first, to the pool where it would end first if the
    pool's GPUs were one fluid machine (its backlog plus the job's duration there)."""
    node_sets, where, gpus = view.node_sets, view.where, view.healthy
    backlog = [0.0] * len(node_sets)  # seconds of work per GPU already there
    for held in instance.running:
        pool = where[instance.parse_gpu(held.gpu_ids[0]).node]
        backlog[pool] += len(held.gpu_ids) * held.remaining_s / gpus[pool]
    assigned: list[list[int]] = [[] for _ in node_sets]
    for position in wspt_order(instance):
        job = instance.queue[position]
        options = view.pools_of(instance, position)
        if not options:
            continue
        duration = {
            p: instance.durations[position][instance.nodes[node_sets[p][0]].gpu_type]
            for p in options
        }
        best = min(options, key=lambda p: (backlog[p] + duration[p], p))
        backlog[best] += job.gpu_count * duration[best] / gpus[best]
        assigned[best].append(position)
    return [
        Pool(tuple(nodes), tuple(sorted(jobs)))
        for nodes, jobs in zip(node_sets, assigned, strict=True)
    ]


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
        held = {where[instance.parse_gpu(gpu).node] for gpu in job.gpu_ids}
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
    """Per pool, each running job (by position) holding GPUs there, with those GPUs
    (read once for all pools: each pool's own view of the running jobs)."""
    where = {k: p for p, pool in enumerate(parts) for k in pool.nodes}
    held: list[dict[int, list[str]]] = [defaultdict(list) for _ in parts]
    for r, job in enumerate(instance.running):
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
        share = len(mine) / len(job.gpu_ids)
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
    return Instance(
        name=instance.name,
        gpu_types={
            t: instance.gpu_types[t] for t in {instance.nodes[k].gpu_type for k in pool.nodes}
        }
        | {t: instance.gpu_types[t] for job in queue for t in job.gpu_types}
        | {t: instance.gpu_types[t] for job in queue for t, _ in job.duration_by_type_s}
        | {t: instance.gpu_types[t] for job in queue for t in job.preferred_gpu_types},
        nodes=tuple(instance.nodes[k] for k in pool.nodes),
        running=tuple(running),
        queue=queue,
        tenants=pool_tenants(instance, pool, quotas, inside_gpus),
        policy=replace(instance.policy, max_preemptions=max_preemptions),
        now=instance.now,
        priority_classes=instance.priority_classes,
    )


PoolSolve = Callable[[Instance, SolveOptions], Decision]
"""How one pool is decided: any policy's round, ``split`` off (it is a pool already)."""


def solve_split(
    instance: Instance,
    solve_pool: PoolSolve,
    solver: str,
    options: SolveOptions,
    *,
    max_gpus: int = DEFAULT_MAX_GPUS,
    executor: Executor | None = None,
    workers: int = 1,
    baseline: Callable[[Instance], list[JobDecision]] | None = None,
) -> Decision:
    """Solve ``instance`` pool by pool with ``solve_pool`` and merge (named ``solver``).

    Each pool gets ``options`` with its share of the time limit: half of it,
    shared between the pools in proportion to their expected work
    (:func:`whale_opt.budget.pool_limits`), heaviest first.

    ``executor`` runs the pools (any :class:`concurrent.futures.Executor`: local
    processes, or a distributed one; ``solve_pool`` and the pools must then
    pickle); None solves them here, one after another. ``workers`` is how many
    pools run at once, which sets each pool's share of the time limit.

    ``baseline`` is a whole-cluster schedule (a list schedule): the merged
    decision is returned unless the baseline is better. Pools see only their
    own nodes, so the merged decision can be worse than a schedule of the
    whole cluster. The baseline is made after the merge, and only when it
    could be better: not when the merged decision's objective is already the
    trivial lower bound (every job ends at its shortest duration from now,
    as in a round where nothing has to wait), which no decision goes below.
    It fits the part of the limit the pools leave (:data:`POOL_SHARE`).
    """
    started = time.perf_counter()
    if not instance.queue:  # nothing to cut or solve: every running job is kept
        merged = merge(instance, [], [], solver, started, options)
        return merged.with_changes(stats={"pools": 0, "pools_fallback": 0})
    parts = pools(instance, max_gpus)
    shares = quota_shares(instance, parts)
    caps = preemption_shares(instance, parts)
    busy = [k for k, pool in enumerate(parts) if pool.jobs]
    inside = running_gpus_by_pool(instance, parts)
    subs = [
        sub_instance(
            instance, parts[k], {n: split[k] for n, split in shares.items()}, caps[k], inside[k]
        )
        for k in busy
    ]
    # Pools run ``workers`` at a time; keep the rest of the limit to split, merge and bound.
    parallel = max(workers, 1) if executor is not None else 1
    spare = POOL_SHARE * options.time_limit_s - (time.perf_counter() - started)
    limits = pool_limits([round_cost(sub).greedy_s for sub in subs], spare, parallel)
    each = [options.replace(time_limit_s=max(0.05, limit)) for limit in limits]
    heaviest = sorted(range(len(subs)), key=lambda k: -limits[k])  # the order pool_limits assumes
    deadline = started + POOL_WAIT * options.time_limit_s
    found, lost = _run_pools(solve_pool, subs, each, heaviest, executor, deadline)
    for k, why in lost.items():
        nodes = parts[busy[k]].nodes
        log.warning(
            "pool %d (nodes %s..%s, %d jobs) falls back to the greedy: %s",
            busy[k],
            instance.nodes[nodes[0]].id,
            instance.nodes[nodes[-1]].id,
            len(subs[k].queue),
            why,
        )
        found[k] = _greedy_pool(subs[k], each[k])
    merged = merge(instance, parts, [found[k] for k in range(len(subs))], solver, started, options)
    stats: dict[str, float | int] = {"pools": len(subs), "pools_fallback": len(lost)}
    stats |= {f"fallback_pool_{busy[k]}": len(subs[k].queue) for k in sorted(lost)}
    if lost:
        merged = merged.with_changes(status=Status.GREEDY_FALLBACK)
    if baseline is not None and merged.objective > trivial_bound(instance):
        alone = assemble(
            instance, solver, baseline(instance), Status.FEASIBLE, merged.bound, started
        )
        if alone.objective < merged.objective:
            return alone.with_changes(stats=stats)
    return merged.with_changes(stats=stats, wall_s=time.perf_counter() - started)


def _run_pools(
    solve_pool: PoolSolve,
    subs: list[Instance],
    each: list[SolveOptions],
    order: list[int],
    executor: Executor | None,
    deadline: float,
) -> tuple[dict[int, Decision], dict[int, str]]:
    """Each pool's decision, and why each pool without one has none (it raised,
    its worker died, or it did not answer by ``deadline``)."""
    found: dict[int, Decision] = {}
    lost: dict[int, str] = {}
    if executor is None:
        for k in order:
            try:
                found[k] = solve_pool(subs[k], each[k])
            except Exception as exc:
                lost[k] = f"{type(exc).__name__}: {exc}"
        return found, lost
    futures: dict[Future[Decision], int] = {
        executor.submit(solve_pool, subs[k], each[k]): k for k in order
    }
    done, late = wait(futures, timeout=max(0.0, deadline - time.perf_counter()))
    for future in done:
        k = futures[future]
        try:
            found[k] = future.result()
        except Exception as exc:  # a lost worker, a dead node, or the solve raised
            lost[k] = f"{type(exc).__name__}: {exc}"
    for future in late:
        future.cancel()
        lost[futures[future]] = "no answer within the time limit"
    return found, lost


def _greedy_pool(sub: Instance, options: SolveOptions) -> Decision:
    """A pool decided here by the WSPT greedy, when its own solve is lost."""
    decision = WsptPolicy().decide(sub, options.replace(report_bound=False))
    return decision.with_changes(status=Status.GREEDY_FALLBACK)


def _has_quota(instance: Instance, position: int) -> bool:
    tenant = instance.tenants.get(instance.queue[position].tenant)
    return tenant is not None and tenant.gpu_quota is not None


class _Merge:
    """The pools' decisions as one, and the jobs the whole-cluster rules take out."""

    def __init__(self, instance: Instance, decisions: list[Decision]) -> None:
        self.instance = instance
        position = instance.queue_index
        running = instance.running_index
        self.decided: dict[int, JobDecision] = {}
        self.preempted: set[int] = set()  # running positions
        for decision in decisions:
            for item in decision.jobs:
                if item.id in position:
                    self.decided[position[item.id]] = item
                elif item.id in running and item.action is Action.PREEMPT:
                    self.preempted.add(running[item.id])
        self.placements = {k: to_placement(instance, k, i) for k, i in self.decided.items()}
        # Quota jobs a pool deferred may fit elsewhere: try them again too.
        self.again = {
            k for k, p in self.placements.items() if p is None and _has_quota(instance, k)
        }

    def items(self) -> list[JobDecision]:
        """The queued decisions kept so far and the preemptions."""
        kept = [item for k, item in self.decided.items() if k not in self.again]
        return kept + [
            JobDecision(self.instance.running[r].id, Action.PREEMPT) for r in sorted(self.preempted)
        ]

    def settle(self) -> None:
        """Take out what breaks a whole-cluster rule until nothing does."""
        while True:
            before = (len(self.again), len(self.preempted))
            self._preemption_rules()
            self._quotas()
            self._release_rule()
            if (len(self.again), len(self.preempted)) == before:
                return

    def _preemption_rules(self) -> None:
        """A preemption that breaks a rule is undone, with what used its GPUs."""
        instance = self.instance
        if not self.preempted:
            return  # nothing to undo
        running = instance.running_index
        for job_id, _ in preemption_problems(instance, self.items()):
            r = running[job_id]
            if r not in self.preempted:
                continue
            self.preempted.discard(r)
            nodes = {instance.parse_gpu(g).node for g in instance.running[r].gpu_ids}
            end = instance.running[r].remaining_s
            for k, placement in self.placements.items():
                if placement is not None and placement.start < end and set(placement.nodes) & nodes:
                    self.again.add(k)

    def _quotas(self) -> None:
        """Jobs of tenants with a quota, in start order, within the whole quota."""
        instance = self.instance
        placed = {k: p for k, p in self.placements.items() if p is not None and k not in self.again}
        bound = {instance.queue[k].tenant for k in placed if _has_quota(instance, k)}
        if not bound:
            return
        use: dict[str, Profile] = defaultdict(Profile)  # GPUs held per tenant over time
        for r, held in enumerate(instance.running):
            if r not in self.preempted and held.tenant in bound:
                use[held.tenant].add(0, held.remaining_s, len(held.gpu_ids))
        for k in sorted(placed, key=lambda k: (placed[k].start, k)):
            job = instance.queue[k]
            if _has_quota(instance, k):
                quota = instance.tenants[job.tenant].gpu_quota or 0
                profile = use[job.tenant]
                if profile.peak(placed[k].start, placed[k].end) + job.gpu_count > quota:
                    self.again.add(k)
                    continue
                profile.add(placed[k].start, placed[k].end, job.gpu_count)

    def _release_rule(self) -> None:
        """Planned NVLink jobs that lost the end they waited for go again.

        Only where a placement was taken out: each pool's plans keep the rule on
        its own nodes, which no other pool shares, so only the nodes of a job
        taken out can lose an end (and a preemption undone only adds one).
        """
        nodes = {k: set(p.nodes) for k, p in self.placements.items() if p is not None}
        touched = set().union(*(nodes[k] for k in self.again if k in nodes))
        if not touched:
            return
        near = [
            item
            for k, item in self.decided.items()
            if k not in self.again and k in nodes and touched & nodes[k]
        ]
        near += [JobDecision(self.instance.running[r].id, Action.PREEMPT) for r in self.preempted]
        position = self.instance.queue_index
        for job_id in unreleased_plans(self.instance, near):
            self.again.add(position[job_id])


def merge(
    instance: Instance,
    parts: list[Pool],
    decisions: list[Decision],
    solver: str,
    started: float,
    options: SolveOptions,
) -> Decision:
    """One decision for the whole instance from the pools' decisions.

    Pools cannot see each other's share of a tenant's running GPUs or of the
    preemption cap, so the preemption rules and the quotas are re-checked on
    the whole decision (:class:`_Merge`); the few jobs taken out are
    list-scheduled again on the whole cluster, within their own pool.
    """
    state = _Merge(instance, decisions)
    state.settle()
    decided = dict(state.decided)
    if state.again or len(decided) < len(instance.queue):
        _replace_again(instance, parts, state, decided)
    jobs = [decided[k] for k in range(len(instance.queue))]  # in queue order
    jobs += [
        JobDecision(job.id, Action.PREEMPT if r in state.preempted else Action.KEEP)
        for r, job in enumerate(instance.running)
    ]
    statuses = {d.status for d in decisions}
    status = (
        Status.FEASIBLE
        if statuses & {Status.FEASIBLE, Status.OPTIMAL}
        else (Status.GREEDY_FALLBACK)
    )

    fits = options.report_bound and bound_fits(instance, options.time_limit_s)
    bound = reported_bound(instance) if fits else trivial_bound(instance)
    return assemble(instance, solver, jobs, status, bound, started)


def _replace_again(
    instance: Instance, parts: list[Pool], state: _Merge, decided: dict[int, JobDecision]
) -> None:
    """Into ``decided`` (queue position -> decision): the jobs the merge took out,
    list-scheduled again on the whole cluster, and a deferral with its reason for
    every queued job no pool decided.

    Only rounds with such jobs build the whole cluster's occupancy.
    """
    gone = frozenset(instance.running[r].id for r in state.preempted)
    timeline = ClusterState(instance, preempted=gone)
    for k, placement in state.placements.items():
        if placement is not None and k not in state.again:
            timeline.commit(k, placement)
    # Re-place within the job's own pool: its nodes are where it was meant to go,
    # and searching the whole cluster costs more than the round has.
    home = {k: frozenset(pool.nodes) for pool in parts for k in pool.jobs}
    for k in wspt_order(instance):
        if k not in state.again:
            continue
        placement = timeline.best_placement(k, within=home.get(k))
        if placement is None:
            decided[k] = JobDecision(
                instance.queue[k].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, k, timeline),
            )
            continue
        timeline.commit(k, placement)
        decided[k] = to_job_decision(instance, k, placement)
    for k, job in enumerate(instance.queue):
        if k not in decided:
            reason = deferral_reason(instance, k, timeline)
            decided[k] = JobDecision(job.id, Action.DEFERRED, reason=reason)
