"""One round, one call: ``solve(instance, solver=...)`` -> :class:`Decision`.

A round returns within its time limit. Its fixed work is the list schedule
every solver starts from and the analytic lower bound; the cost model
(:mod:`whale_opt.budget`) predicts both, and the round adapts:

- a cluster past ``split_above_gpus`` GPUs, or one whose list schedule
  would not fit :data:`whale_opt.budget.GREEDY_SHARE` of the limit and that has racks to
  split on, is cut into pools solved in parallel (:mod:`whale_opt.decompose`;
  a pool of a P-th of the nodes and of the queue costs under a P-th), each
  with a share of the limit in proportion to its expected work; for the
  solvers that start from the WSPT greedy (``wspt``, ``cpsat``), when the
  whole round's list schedule fits its share of the limit, it is made first
  and returned instead of the merged pools when they do not beat it; a
  split is made only when the limit has room for its own overhead (each
  worker's pools, the merge: :func:`whale_opt.decompose.split_pays`), else
  the round is decided in one piece as below;
- a queue still too long (one rack of one type, or within a pool) is cut:
  its head, by class rank then Smith's ratio, is decided, and the rest is
  deferred to a later round (:func:`whale_opt.budget.solve_head`);
- an analytic bound that would not fit :data:`whale_opt.budget.BOUND_SHARE` of the limit is
  replaced by the trivial one (``options.report_bound`` off): weaker, as honest.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

from whale_opt.budget import (
    GREEDY_SHARE,
    bound_fits,
    head_size,
    round_cost,
    solve_head,
    split_size,
)
from whale_opt.cpsat.model import CpSatPolicy
from whale_opt.decision import Decision, JobDecision
from whale_opt.decompose import DEFAULT_MAX_GPUS, solve_split, split_pays
from whale_opt.executors import LocalExecutor
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import list_schedule
from whale_opt.policies.protocol import SchedulingPolicy
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance
from whale_opt.registry import REGISTRY, get_policy

SOLVERS = tuple(REGISTRY)
SPLIT_ABOVE_GPUS = 2048
LOCAL_WORKERS = 2  # processes that solve the pools of a split round by default


def solve(
    instance: Instance,
    solver: str = "wspt",
    options: SolveOptions | None = None,
    *,
    preset: str | None = None,
    time_limit_s: float | None = None,
    split_above_gpus: int | None = SPLIT_ABOVE_GPUS,
    split: bool = True,
    policy: SchedulingPolicy | None = None,
    executor: Executor | None = None,
) -> Decision:
    """Decide one round of ``instance`` with the named policy or solver.

    ``options`` are the run settings (default ``SolveOptions()``);
    ``time_limit_s`` and ``preset`` override theirs. Clusters with more
    than ``split_above_gpus`` GPUs (None: no such threshold), and rounds
    whose queue is too long for the time limit, are cut into pools solved in
    parallel (:mod:`whale_opt.decompose`) unless ``split`` is off; a queue
    still too long is cut to its head (see the module docstring).
    ``policy`` is an already built ``solver`` to reuse across rounds (pools
    solved in worker processes build their own from the name). ``executor``
    runs the pools of a split round (default: :data:`LOCAL_WORKERS` local
    processes).
    """
    options = SolveOptions() if options is None else options
    if time_limit_s is not None:
        options = options.replace(time_limit_s=time_limit_s)
    if preset is not None:
        options = options.replace(preset=preset)
    if policy is None:
        policy = get_policy(solver, preset=options.preset)  # fail early on a bad name or preset
    cost = round_cost(instance)
    if split:
        gpus = sum(node.gpu_count for node in instance.nodes)
        max_gpus = split_size(instance, options.time_limit_s, cost)
        large = split_above_gpus is not None and gpus > split_above_gpus
        if large and (max_gpus is None or max_gpus >= DEFAULT_MAX_GPUS):
            max_gpus = DEFAULT_MAX_GPUS
        workers = _workers(executor)
        if max_gpus is not None and split_pays(instance, options.time_limit_s, max_gpus, workers):
            # Solvers that start from the WSPT greedy return no worse than the whole
            # round's, when it fits its share of the limit.
            greedy = isinstance(policy, WsptPolicy | CpSatPolicy)
            fits = cost.greedy_s <= GREEDY_SHARE * options.time_limit_s
            baseline = wspt_greedy if greedy and fits else None
            return _solve_pools(instance, solver, options, max_gpus, executor, baseline)
    if options.report_bound and not bound_fits(instance, options.time_limit_s, cost):
        options = options.replace(report_bound=False)
    budget = GREEDY_SHARE * options.time_limit_s
    if cost.greedy_s > budget:
        head = head_size(instance, wspt_order(instance), budget)
        if head < len(instance.queue):
            return solve_head(instance, head, partial(policy.decide, options=options), solver)
    return policy.decide(instance, options)


def wspt_greedy(instance: Instance) -> list[JobDecision]:
    """The WSPT list schedule of the whole round: wspt's decision before
    preemption, and CP-SAT's first incumbent."""
    return list_schedule(instance, wspt_order(instance), prefer=WsptPolicy.prefer)


def solve_one_pool(instance: Instance, options: SolveOptions, *, solver: str) -> Decision:
    """One pool of a split round, decided by ``solver`` (a pool is not split again)."""
    return solve(instance, solver, options, split=False)


def _workers(executor: Executor | None) -> int:
    """How many pools ``executor`` runs at once (None: our local workers). The
    standard executors say; assume the local count for one that does not (it
    only sets each pool's share of the limit)."""
    return int(getattr(executor, "_max_workers", LOCAL_WORKERS))


def _solve_pools(
    instance: Instance,
    solver: str,
    options: SolveOptions,
    max_gpus: int,
    executor: Executor | None,
    baseline: Callable[[Instance], list[JobDecision]] | None = None,
) -> Decision:
    """The round cut into pools of at most ``max_gpus`` GPUs, each solved by ``solver``
    on ``executor`` (None: :data:`LOCAL_WORKERS` local processes, made for the round),
    no worse than ``baseline`` (see :func:`whale_opt.decompose.solve_split`)."""
    # Our own local workers: one killed or hung fails only its pool, and the round
    # does not wait for a hung one on its way out.
    pool = LocalExecutor(LOCAL_WORKERS) if executor is None else executor
    try:
        workers = _workers(pool)
        return solve_split(
            instance,
            partial(solve_one_pool, solver=solver),
            solver,
            options,
            max_gpus=max_gpus,
            executor=pool,
            workers=workers,
            baseline=baseline,
        )
    finally:
        if executor is None:
            pool.shutdown(wait=False, cancel_futures=True)
