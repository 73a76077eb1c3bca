"""A split round: pools solved on an executor (a lost or late pool decided by
the greedy), then merged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from functools import partial

from whale_opt.bounds import trivial_bound
from whale_opt.budget import (
    POOL_OVERHEAD_S,
    dispatch_ends,
    head_size,
    merge_seconds,
    pool_limits,
    round_cost,
    solve_head,
)
from whale_opt.decision import Decision, JobDecision, Status
from whale_opt.decompose.cut import pool_count, pools
from whale_opt.decompose.limits import (
    AFTER_POOLS_S,
    DEFAULT_MAX_GPUS,
    MIN_POOL_SHARE,
    OVERDUE_SHARE,
    POOL_SHARE,
    POOL_WAIT,
)
from whale_opt.decompose.merge import merge
from whale_opt.decompose.sub import (
    preemption_shares,
    quota_shares,
    running_gpus_by_pool,
    sub_instance,
)
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance

log = logging.getLogger("whale_opt")


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

    Each pool gets ``options`` with its share of the time limit: :func:`pool_seconds` of it,
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
    It fits the part of the limit the pools leave (:func:`pool_seconds`).
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
    spare = pool_seconds(options.time_limit_s) - (time.perf_counter() - started)
    costs = [round_cost(sub).greedy_s for sub in subs]
    limits = pool_limits(costs, spare, parallel)
    each = [options.replace(time_limit_s=max(0.05, limit)) for limit in limits]
    heaviest = sorted(range(len(subs)), key=lambda k: -limits[k])  # the order pool_limits assumes
    deadline = started + pools_due_s(instance, options.time_limit_s)
    found, lost = _run_pools(
        solve_pool,
        subs,
        each,
        heaviest,
        executor,
        _Fallbacks(subs, each, costs, deadline),
        parallel,
    )
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
            merged = alone
    if merged.meets_bound:  # however its pools ended, no decision costs less
        merged = merged.with_changes(status=Status.OPTIMAL)
    return merged.with_changes(stats=stats, wall_s=time.perf_counter() - started)


class _Fallbacks:
    """The greedy's decisions of pools decided here, each within its share of the
    time left to the deadline."""

    def __init__(
        self, subs: list[Instance], each: list[SolveOptions], costs: list[float], deadline: float
    ) -> None:
        self.subs = subs
        self.each = each
        self.costs = costs  # each pool's list schedule, predicted
        self.deadline = deadline
        self.made: dict[int, Decision] = {}

    def make(self, k: int, waiting: list[int]) -> Decision:
        """Pool ``k``'s greedy, given the time left in proportion to its predicted
        cost among its own and that of the pools in ``waiting`` (those that may
        still need theirs)."""
        if k not in self.made:
            share = self.costs[k] / max(sum(self.costs[j] for j in {k, *waiting}), 1e-9)
            left = max(0.0, self.deadline - time.perf_counter())
            self.made[k] = _greedy_pool(self.subs[k], self.each[k], share * left, self.costs[k])
        return self.made[k]


def pool_seconds(limit: float) -> float:
    """The part of a split round's time limit the pools get (:data:`POOL_SHARE`,
    :data:`AFTER_POOLS_S` and :data:`MIN_POOL_SHARE`)."""
    return max(MIN_POOL_SHARE * limit, min(POOL_SHARE * limit, limit - AFTER_POOLS_S))


def pools_due_s(instance: Instance, limit: float) -> float:
    """When, from a split round's start, pools not back are decided by the greedy
    here: :data:`POOL_WAIT` of ``limit``, or earlier when the merge after them is
    expected to need more than the rest (:func:`whale_opt.budget.merge_seconds`)."""
    return min(POOL_WAIT * limit, limit - merge_seconds(instance))


def split_pays(instance: Instance, limit: float, max_gpus: int, workers: int) -> bool:
    """Whether a split of ``instance`` into pools of ``max_gpus`` GPUs on ``workers``
    workers has time for its own overhead within ``limit``: the pools each
    worker takes one after another, each its overhead
    (:data:`whale_opt.budget.POOL_OVERHEAD_S`) and as long again to search,
    before the pools' deadline, with the merge after it. Where it has not,
    the pools would come back late and be decided by the greedy here, past
    the limit: the round is better decided in one piece, its queue cut to
    the head that fits."""
    rounds = -(-pool_count(instance, max_gpus) // max(workers, 1))
    room = min(pool_seconds(limit), pools_due_s(instance, limit))
    return room >= rounds * 2 * POOL_OVERHEAD_S


def _due(each: list[SolveOptions], parallel: int, now: float) -> list[float]:
    """When each pool's answer is due: the pools on ``parallel`` workers heaviest
    first (:func:`whale_opt.budget.dispatch_ends`, as :func:`pool_limits` assumes),
    each taking its limit and a worker's overhead, and :data:`OVERDUE_SHARE` of
    its limit more."""
    ends = dispatch_ends([o.time_limit_s + POOL_OVERHEAD_S for o in each], parallel)
    return [now + end + OVERDUE_SHARE * o.time_limit_s for end, o in zip(ends, each, strict=True)]


def _run_pools(
    solve_pool: PoolSolve,
    subs: list[Instance],
    each: list[SolveOptions],
    order: list[int],
    executor: Executor | None,
    fallbacks: _Fallbacks,
    parallel: int,
) -> tuple[dict[int, Decision], dict[int, str]]:
    """Each pool's decision, its own or the greedy's, and why each pool decided
    by the greedy lost its own (it raised, its worker died, or it did not answer
    by the fallbacks' deadline).

    Pools decided by the greedy are decided here while the others run, so a
    round whose workers die or hang still ends near the deadline, not that many
    greedies later: a pool whose solve failed at once, and a pool still out past
    the time its answer was due (:func:`_due`), longest overdue first. An answer
    that comes meanwhile is taken over the greedy. Each greedy gets its share of
    the time left (:class:`_Fallbacks`): where the whole pool's list schedule
    would not fit it, its head is decided and the rest deferred to the next
    round. (Keeping time before the deadline for the greedies of every pool
    still out would start them at once in a round split for its size, and on a
    small machine the leader's greedies then slow the workers past their own
    limits.)
    """
    found: dict[int, Decision] = {}
    lost: dict[int, str] = {}
    if executor is None:
        for k in order:
            try:
                found[k] = solve_pool(subs[k], each[k])
            except Exception as exc:
                lost[k] = f"{type(exc).__name__}: {exc}"
                found[k] = fallbacks.make(k, [])
        return found, lost
    deadline = fallbacks.deadline
    due = _due(each, parallel, time.perf_counter())
    out: dict[Future[Decision], int] = {
        executor.submit(solve_pool, subs[k], each[k]): k for k in order
    }
    while out:
        waiting = sorted(out.values(), key=due.__getitem__)
        uncovered = [k for k in waiting if k not in fallbacks.made]
        now = time.perf_counter()
        if uncovered and now >= due[uncovered[0]]:
            fallbacks.make(uncovered[0], uncovered)
            done = {future for future in out if future.done()}
        else:
            until = min(due[uncovered[0]], deadline) if uncovered else deadline
            done, _ = wait(out, timeout=max(0.0, until - now), return_when=FIRST_COMPLETED)
            if not done and time.perf_counter() >= deadline:
                break
        for future in done:
            k = out.pop(future)
            try:
                found[k] = future.result()
            except Exception as exc:  # a lost worker, a dead node, or the solve raised
                lost[k] = f"{type(exc).__name__}: {exc}"
                found[k] = fallbacks.make(k, [j for j in out.values() if j not in fallbacks.made])
    for future, k in out.items():
        future.cancel()
        lost[k] = "no answer within the time limit"
    for k in sorted(out.values(), key=due.__getitem__):
        found[k] = fallbacks.make(k, [j for j in out.values() if j not in fallbacks.made])
    return found, lost


def _greedy_pool(
    sub: Instance, options: SolveOptions, budget_s: float, greedy_s: float
) -> Decision:
    """A pool decided here by the WSPT greedy, when its own solve is lost: the jobs
    whose list schedule is expected to fit ``budget_s`` (its head, by class rank
    then Smith's ratio; at least one), the rest deferred to the next round.
    ``greedy_s``: the whole pool's list schedule, predicted."""
    decide = partial(WsptPolicy().decide, options=options.replace(report_bound=False))
    if greedy_s <= budget_s:
        decision = decide(sub)
    else:
        decision = solve_head(sub, head_size(sub, wspt_order(sub), budget_s), decide, "wspt")
    return decision.with_changes(status=Status.GREEDY_FALLBACK)
