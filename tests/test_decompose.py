"""Large rounds split into pools: the merged decision is valid for the whole cluster."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial

import pytest

from whale_opt.budget import TAIL_REASON, round_cost
from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.decompose import (
    PoolSolve,
    merge,
    pools,
    preemption_shares,
    solve_split,
    sub_instance,
)
from whale_opt.decompose.cut import pool_count
from whale_opt.decompose.split import _greedy_pool, pool_seconds
from whale_opt.executors import LocalExecutor, WorkerLost
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble
from whale_opt.problem_data import (
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
    tenant_guarantee,
)
from whale_opt.registry import get_policy
from whale_opt.rules import held_by_tenant
from whale_opt.solve import solve, solve_one_pool, wspt_greedy


def _pool(solver: str) -> Callable[[Instance, SolveOptions], Decision]:
    """Each pool solved here by ``solver``, as :func:`whale_opt.solve.solve` does it."""
    return partial(solve_one_pool, solver=solver)


@pytest.mark.parametrize("family", ["hetero", "dgx1", "fragmented"])
def test_split_decision_passes_the_checker(family: str) -> None:
    instance = generate(family, gpus=256, queued=80, seed=4)
    decision = solve_split(
        instance, _pool("wspt"), "wspt", SolveOptions(time_limit_s=2.0), max_gpus=64
    )
    assert check(instance, decision) == []
    assert {item.id for item in decision.jobs} == {job.id for job in instance.queue} | {
        job.id for job in instance.running
    }


def test_pools_hold_whole_racks_of_one_type_and_each_job_once() -> None:
    instance = generate("hetero", gpus=512, queued=120, seed=1)
    parts = pools(instance, max_gpus=64)
    seen_nodes = [k for pool in parts for k in pool.nodes]
    assert sorted(seen_nodes) == list(range(len(instance.nodes)))
    for pool in parts:
        assert len({instance.nodes[k].gpu_type for k in pool.nodes}) == 1
        racks = {instance.nodes[k].rack for k in pool.nodes}
        gpu_type = instance.nodes[pool.nodes[0]].gpu_type
        members = [
            k
            for k, node in enumerate(instance.nodes)
            if node.rack in racks and node.gpu_type == gpu_type
        ]
        assert sorted(members) == sorted(pool.nodes)  # racks are never cut
    jobs = [k for pool in parts for k in pool.jobs]
    assert len(jobs) == len(set(jobs))


def test_the_pool_count_is_of_node_sets_some_queued_job_could_use() -> None:
    # What decides whether a split pays: pools with no job to solve cost nothing.
    instance = generate("hetero", gpus=1024, queued=500, seed=900)
    parts = pools(instance, 256)
    assert pool_count(instance, 256) == sum(1 for part in parts if part.jobs) == len(parts)
    h100 = instance.replace(queue=tuple(j for j in instance.queue if j.gpu_types == ("H100-80G",)))
    sets = sum(1 for part in parts if instance.nodes[part.nodes[0]].gpu_type == "H100-80G")
    assert 0 < pool_count(h100, 256) == sets < len(parts)
    assert pool_count(instance.replace(queue=()), 256) == 0


def test_a_tight_quota_spanning_pools_holds_after_the_merge() -> None:
    instance = generate("hetero", gpus=256, queued=80, seed=2)
    tenants = dict(instance.tenants)
    tenants["nlp"] = Tenant("nlp", gpu_quota=12)
    instance = instance.replace(tenants=tenants)
    decision = solve_split(
        instance, _pool("wspt"), "wspt", SolveOptions(time_limit_s=2.0), max_gpus=64
    )
    assert check(instance, decision) == []


def test_solve_splits_past_the_threshold_with_worker_processes() -> None:
    instance = generate("hetero", gpus=256, queued=60, seed=3)
    decision = solve(instance, "cpsat", time_limit_s=4.0, split_above_gpus=128)
    assert check(instance, decision) == []


# -- priority classes, guarantees and preemption across pools --------------------------------


def _two_rack_round(cap: int | None) -> Instance:
    """Two 8-GPU racks, each held by a best-effort job a training job may displace."""
    nodes = tuple(
        Node(f"n{k}", "A100-80G", 8, "nvswitch", 128, 1024, rack=f"r{k}") for k in range(2)
    )
    running = tuple(
        RunningJob(
            f"v{k}",
            tuple(f"n{k}/{i}" for i in range(8)),
            20_000,
            priority_class="best-effort",
            started_at=-3600,
            since_checkpoint_s=600,
        )
        for k in range(2)
    )
    queue = tuple(QueuedJob(f"q{k}", 8, 1000) for k in range(2))
    return Instance(
        name="two-racks",
        gpu_types={"A100-80G": GpuType("A100-80G", 80, 1.0)},
        nodes=nodes,
        running=running,
        queue=queue,
        policy=Policy(allow_preemption=True, max_preemptions=cap),
    )


def test_pools_carry_classes_and_guarantees_that_compare_as_on_the_whole_cluster() -> None:
    instance = generate("hetero", gpus=256, queued=40, seed=5)
    classes = {**instance.priority_classes, "urgent": PriorityClass("urgent", 3.0, 5)}
    queue = tuple(
        replace(q, priority_class="urgent") if k % 3 == 0 else q
        for k, q in enumerate(instance.queue)
    )
    held = held_by_tenant(instance)
    tenants = {
        name: Tenant(name, tenant.gpu_quota, min(held[name] + (3 if k % 2 else -3), 200))
        for k, (name, tenant) in enumerate(instance.tenants.items())
        if tenant.gpu_quota is None
    }
    instance = instance.replace(priority_classes=classes, queue=queue, tenants=tenants)
    parts = pools(instance, max_gpus=64)
    for pool in parts:
        sub = sub_instance(instance, pool, {})
        assert dict(sub.priority_classes) == dict(instance.priority_classes)
        inside = held_by_tenant(sub)
        for name in tenants:
            if not inside[name]:
                continue
            whole = held[name] - tenant_guarantee(instance, name)
            part = inside[name] - tenant_guarantee(sub, name)
            assert (whole > 0, whole < 0) == (part > 0, part < 0)


def test_a_running_job_spanning_pools_may_be_preempted_in_neither() -> None:
    instance = _two_rack_round(None)
    spanning = RunningJob("span", ("n0/0", "n1/0"), 5000, priority_class="best-effort")
    instance = instance.replace(
        running=(
            replace(instance.running[0], gpu_ids=tuple(f"n0/{i}" for i in range(1, 8))),
            replace(instance.running[1], gpu_ids=tuple(f"n1/{i}" for i in range(1, 8))),
            spanning,
        )
    )
    for pool in pools(instance, max_gpus=8):
        sub = sub_instance(instance, pool, {})
        cut = next(job for job in sub.running if job.id == "span")
        assert not cut.preemptible


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_a_cpu_only_running_job_keeps_its_cpu_in_its_pool(solver: str) -> None:
    # One free 8-GPU node a rack; a CPU-only job holds 120 of n1's 128 CPUs.
    instance = _two_rack_round(None).replace(
        running=(RunningJob("c", (), 5000, node="n1", cpu=120),),
        queue=tuple(QueuedJob(f"q{k}", 8, 1000, cpu=64) for k in range(2)),
    )
    parts = pools(instance, max_gpus=8)
    home = next(pool for pool in parts if instance.node_index["n1"] in pool.nodes)
    assert [job.id for job in sub_instance(instance, home, {}).running] == ["c"]
    decision = solve_split(
        instance, _pool(solver), solver, SolveOptions(time_limit_s=1.0), max_gpus=8
    )
    assert check(instance, decision) == []
    starts = {item.id for item in decision.jobs if item.action is Action.START}
    assert len(starts) == 1  # n1's CPUs are taken until the CPU-only job ends


def test_merge_undoes_the_preemptions_the_whole_round_cap_forbids() -> None:
    instance = _two_rack_round(1)
    parts = pools(instance, max_gpus=8)
    assert preemption_shares(instance, parts) in ([1, 0], [0, 1])
    # Pools that each think they may preempt (as pools of an uncapped round would).
    subs = [sub_instance(instance, pool, {}, None) for pool in parts]
    decisions = [get_policy("wspt").decide(sub) for sub in subs]
    assert all(any(i.action is Action.PREEMPT for i in d.jobs) for d in decisions)
    merged = merge(instance, parts, decisions, "wspt", time.perf_counter(), SolveOptions())
    assert check(instance, merged) == []
    assert sum(item.action is Action.PREEMPT for item in merged.jobs) == 1


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_split_round_with_classes_guarantees_and_preemption_passes_the_checker(
    solver: str,
) -> None:
    # A full cluster (load 1): online jobs wait unless best-effort work is preempted.
    instance = generate("hetero", gpus=256, queued=60, seed=6, load=1.0)
    running = tuple(
        replace(job, priority_class="best-effort", since_checkpoint_s=0) if k % 2 else job
        for k, job in enumerate(instance.running)
    )
    queue = tuple(
        replace(job, priority_class="online") if k % 5 == 0 else job
        for k, job in enumerate(instance.queue)
    )
    held = held_by_tenant(instance)
    tenants = dict(instance.tenants)
    tenants["cv"] = Tenant("cv", None, held["cv"] + 16)
    instance = instance.replace(
        running=running,
        queue=queue,
        tenants=tenants,
        policy=replace(instance.policy, allow_preemption=True, max_preemptions=3),
    )
    decision = solve_split(
        instance, _pool(solver), solver, SolveOptions(time_limit_s=0.8), max_gpus=64
    )
    assert check(instance, decision) == []
    assert 1 <= sum(item.action is Action.PREEMPT for item in decision.jobs) <= 3


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_a_split_round_is_no_worse_than_the_whole_rounds_greedy(solver: str) -> None:
    # Pools see only their own nodes: a job of the whole greedy's that spans racks
    # can not be placed the same way in one pool, and the merge can lose to it.
    instance = generate("hetero", gpus=512, queued=200, seed=2)
    greedy = assemble(instance, "wspt", wspt_greedy(instance), Status.FEASIBLE, 0.0, 0.0)
    decision = solve_split(
        instance,
        _pool(solver),
        solver,
        SolveOptions(time_limit_s=2.0),
        max_gpus=64,
        baseline=wspt_greedy,
    )
    assert check(instance, decision) == []
    assert decision.objective <= greedy.objective
    # solve() gives the greedy as the baseline to the solvers that start from it.
    split = solve(instance, solver, time_limit_s=4.0, split_above_gpus=128)
    assert check(instance, split) == []
    assert split.objective <= greedy.objective


def test_a_split_round_that_meets_its_bound_is_optimal() -> None:
    # An idle cluster: every job starts now where it runs fastest, which is the
    # bound itself; however its pools ended, the decision is optimal.
    instance = generate("hetero", gpus=512, queued=20, seed=3).replace(running=())
    decision = solve_split(
        instance, _pool("cpsat"), "cpsat", SolveOptions(time_limit_s=2.0), max_gpus=64
    )
    assert check(instance, decision) == []
    assert decision.stats["pools"] > 1
    assert decision.gap == 0.0 and decision.status is Status.OPTIMAL
    # With more work than starts now where it runs fastest, a gap: not called optimal.
    loaded = generate("hetero", gpus=512, queued=20, seed=2).replace(running=())
    decision = solve_split(
        loaded, _pool("cpsat"), "cpsat", SolveOptions(time_limit_s=2.0), max_gpus=64
    )
    assert decision.gap > 0 and decision.status is not Status.OPTIMAL


# -- a pool whose worker dies ------------------------------------------------------

DOOMED = "h100-0000"  # the first node of the busiest pool of lost_round()
LOST_OPTIONS = SolveOptions(time_limit_s=20.0, preset="deterministic")


def lost_round() -> Instance:
    """A round of seven pools at 128 GPUs, without quotas: a quota spans pools, and
    its merge-time re-check could move jobs of other pools when the doomed pool's
    decisions change."""
    instance = generate("hetero", gpus=512, queued=60, seed=3)
    return instance.replace(
        tenants={name: Tenant(name) for name in instance.tenants},
    )


def dies_with_its_pool(instance: Instance, options: SolveOptions, *, solver: str) -> Decision:
    """A pool solve that kills its own worker process when it holds node DOOMED."""
    if any(node.id == DOOMED for node in instance.nodes):
        os._exit(1)
    return solve_one_pool(instance, options, solver=solver)


def doomed_jobs(instance: Instance, max_gpus: int) -> set[str]:
    """Ids of the queued jobs assigned to the pool that holds DOOMED."""
    (pool,) = [p for p in pools(instance, max_gpus) if instance.nodes[p.nodes[0]].id == DOOMED]
    return {instance.queue[k].id for k in pool.jobs}


def test_a_worker_killed_mid_round_costs_only_its_pool_its_policy() -> None:
    # Pools decided by fifo (deterministic, unlike a wall-clock-limited solver under
    # contention), so the pools that survive must decide exactly as in a whole run.
    instance = lost_round()
    with LocalExecutor(2) as local:
        lost = solve_split(
            instance,
            partial(dies_with_its_pool, solver="fifo"),
            "fifo",
            LOST_OPTIONS,
            max_gpus=128,
            executor=local,
            workers=2,
        )
        whole = solve_split(
            instance, _pool("fifo"), "fifo", LOST_OPTIONS, max_gpus=128, executor=local, workers=2
        )
    greedy = solve_split(instance, _pool("wspt"), "wspt", LOST_OPTIONS, max_gpus=128)
    assert check(instance, lost) == []
    assert lost.wall_s < LOST_OPTIONS.time_limit_s
    assert lost.status is Status.GREEDY_FALLBACK and whole.status is not Status.GREEDY_FALLBACK
    assert lost.stats["pools_fallback"] == 1 and whole.stats["pools_fallback"] == 0
    doomed = doomed_jobs(instance, 128)
    (named,) = [key for key in lost.stats if key.startswith("fallback_pool_")]
    assert lost.stats[named] == len(doomed)
    for item in lost.jobs:
        assert item == (greedy.job(item.id) if item.id in doomed else whole.job(item.id))
    assert sum(greedy.job(j) != whole.job(j) for j in doomed) > len(doomed) // 2


def test_a_broken_process_pool_still_leaves_a_checked_decision() -> None:
    instance = lost_round()
    options = SolveOptions(time_limit_s=5.0)
    with ProcessPoolExecutor(2) as broken:
        decision = solve_split(
            instance,
            partial(dies_with_its_pool, solver="wspt"),
            "wspt",
            options,
            max_gpus=128,
            executor=broken,
            workers=2,
        )
    assert check(instance, decision) == []
    assert decision.wall_s < options.time_limit_s
    assert decision.status is Status.GREEDY_FALLBACK
    # A ProcessPoolExecutor fails every task it still held: at least the doomed pool.
    assert 1 <= decision.stats["pools_fallback"] <= decision.stats["pools"]


def raises_in_one_pool(instance: Instance, options: SolveOptions) -> Decision:
    """A pool solve that raises in the pool that holds DOOMED."""
    if any(node.id == DOOMED for node in instance.nodes):
        raise RuntimeError("solver crashed")
    return solve_one_pool(instance, options, solver="wspt")


def test_a_pool_that_raises_here_falls_back_too() -> None:
    instance = lost_round()
    decision = solve_split(instance, raises_in_one_pool, "wspt", LOST_OPTIONS, max_gpus=128)
    assert check(instance, decision) == []
    assert decision.stats["pools_fallback"] == 1
    assert decision.status is Status.GREEDY_FALLBACK


def test_the_local_executor_replaces_a_dead_worker_and_keeps_the_others() -> None:
    with LocalExecutor(2) as local:
        futures = [local.submit(_square_or_die, x) for x in range(6)]
        outcomes = []
        for future in futures:
            try:
                outcomes.append(future.result(timeout=30))
            except WorkerLost:
                outcomes.append(None)
        assert outcomes == [0, 1, 4, None, 16, 25]
        assert list(local.map(_square_or_die, [5, 6])) == [25, 36]


def _square_or_die(x: int) -> int:
    if x == 3:
        os._exit(3)
    return x * x


def hangs_in_one_pool(instance: Instance, options: SolveOptions) -> Decision:
    """A pool solve that never answers in the pool that holds DOOMED."""
    if any(node.id == DOOMED for node in instance.nodes):
        time.sleep(60)
    return solve_one_pool(instance, options, solver="fifo")


def split_on_two_workers(
    instance: Instance, solve_pool: PoolSolve, solver: str, options: SolveOptions
) -> Decision:
    """``solve_split`` into pools of 128 GPUs on two local workers, which are not
    waited for on the way out (a hung one is left to die)."""
    local = LocalExecutor(2)
    try:
        return solve_split(
            instance, solve_pool, solver, options, max_gpus=128, executor=local, workers=2
        )
    finally:
        local.shutdown(wait=False)


def test_a_pool_without_an_answer_by_the_deadline_falls_back() -> None:
    instance = lost_round()
    options = SolveOptions(time_limit_s=2.0)
    decision = split_on_two_workers(instance, hangs_in_one_pool, "fifo", options)
    assert check(instance, decision) == []
    assert decision.wall_s < options.time_limit_s
    assert decision.stats["pools_fallback"] == 1


def hangs_in_every_pool(instance: Instance, options: SolveOptions) -> Decision:
    """A pool solve that never answers."""
    time.sleep(60)
    raise AssertionError("unreachable")


def test_a_round_whose_every_pool_hangs_still_ends_within_its_limit() -> None:
    # Seven pools whose greedies take about a second here: made after the wait for
    # the pools, they would end the round past its limit; made as each pool's
    # answer falls overdue, they end it within.
    instance = generate("hetero", gpus=512, queued=2000, seed=3)
    options = SolveOptions(time_limit_s=3.0)
    decision = split_on_two_workers(instance, hangs_in_every_pool, "wspt", options)
    assert check(instance, decision) == []
    assert decision.wall_s < options.time_limit_s
    assert decision.stats["pools_fallback"] == decision.stats["pools"] == 7
    assert decision.status is Status.GREEDY_FALLBACK


def test_a_lost_pool_with_no_time_left_decides_its_head_and_defers_the_rest() -> None:
    instance = generate("hetero", gpus=64, queued=200, seed=3)
    options = SolveOptions(time_limit_s=2.0)
    greedy_s = round_cost(instance).greedy_s
    roomy = _greedy_pool(instance, options, budget_s=60.0, greedy_s=greedy_s)
    assert not any(item.reason == TAIL_REASON for item in roomy.jobs)
    rushed = _greedy_pool(instance, options, budget_s=0.0, greedy_s=greedy_s)
    assert check(instance, rushed) == []
    assert rushed.status is Status.GREEDY_FALLBACK
    tail = [item for item in rushed.jobs if item.reason == TAIL_REASON]
    assert len(tail) == len(instance.queue) - 1  # the head is one job
    assert all(item.action is Action.DEFERRED for item in tail)


def test_the_pools_get_most_of_a_long_limit_and_half_of_a_short_one() -> None:
    # Half a short limit (the pools' fixed work weighs more there), at least half a
    # second after the pools, and 0.65 of a long limit.
    assert pool_seconds(0.5) == pytest.approx(0.25)
    assert pool_seconds(1.0) == pytest.approx(0.5)
    assert pool_seconds(2.0) == pytest.approx(1.3)
    assert pool_seconds(30.0) == pytest.approx(19.5)


# -- what a replay's rounds reuse or skip --------------------------------------------


@pytest.mark.parametrize(("family", "queued"), [("hetero", 200), ("dgx1", 60), ("fragmented", 8)])
def test_the_baseline_wins_exactly_as_when_it_was_always_made(family: str, queued: int) -> None:
    instance = generate(family, gpus=512, queued=queued, seed=2)
    options = SolveOptions(time_limit_s=10.0)
    decision = solve_split(
        instance, _pool("wspt"), "wspt", options, max_gpus=64, baseline=wspt_greedy
    )
    merged = solve_split(instance, _pool("wspt"), "wspt", options, max_gpus=64)
    alone = assemble(instance, "wspt", wspt_greedy(instance), Status.FEASIBLE, 0.0, 0.0)
    expected = alone if alone.objective < merged.objective else merged
    assert decision.jobs == expected.jobs


def _no_baseline(instance: Instance) -> list[JobDecision]:
    raise AssertionError("the baseline cannot beat a decision at the trivial bound")


def test_no_baseline_is_made_when_nothing_has_to_wait() -> None:
    instance = generate("hetero", gpus=512, queued=0, seed=2)
    options = SolveOptions(time_limit_s=10.0)
    empty = solve_split(
        instance, _pool("wspt"), "wspt", options, max_gpus=64, baseline=_no_baseline
    )
    assert check(instance, empty) == [] and empty.objective == 0
    idle = instance.replace(running=(), queue=generate("hetero", gpus=512, queued=3, seed=2).queue)
    few = solve_split(idle, _pool("wspt"), "wspt", options, max_gpus=64, baseline=_no_baseline)
    assert check(idle, few) == [] and {item.start_s for item in few.jobs} == {0}


def test_pools_are_cut_afresh_when_a_node_record_changes() -> None:
    instance = lost_round()
    first = pools(instance, 128)
    assert pools(instance.replace(queue=instance.queue[:30]), 128) == pools(
        instance.replace(queue=instance.queue[:30], nodes=tuple(map(_copy, instance.nodes))), 128
    )
    nodes = list(instance.nodes)
    busiest = max(first, key=lambda p: len(p.jobs))
    for k in busiest.nodes:
        nodes[k] = replace(nodes[k], down=True)
    down = instance.replace(running=(), nodes=tuple(nodes))
    moved = pools(down, 128)
    assert all(not set(busiest.nodes) & {*p.nodes} or not p.jobs for p in moved)
    assert moved != first


def _copy(node: Node) -> Node:
    return replace(node)


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_a_gang_no_pool_can_hold_is_placed_on_the_whole_cluster(solver: str) -> None:
    """An ``any`` gang of 40 GPUs on four racks of 16 cut into pools of 16: no pool
    holds it, the cluster does. It was assigned to a pool, which deferred it every
    round (as if it could never run); it is now placed after the pools."""
    types = {"A": GpuType("A", 80)}
    nodes = tuple(
        Node(f"n{r}{i}", "A", 8, "nvswitch", rack=f"r{r}") for r in range(4) for i in range(2)
    )
    queue = (
        QueuedJob("big", 40, 600, topology="any"),
        QueuedJob("small", 1, 600),
        QueuedJob("huge", 80, 600, topology="any"),  # more than the cluster: never
    )
    instance = Instance("split-gang", types, nodes, queue=queue)
    solve_pool = partial(solve_one_pool, solver=solver)
    decision = solve_split(instance, solve_pool, solver, SolveOptions(time_limit_s=1), max_gpus=16)
    assert check(instance, decision) == []
    assert decision.job("big").action is Action.START
    assert decision.job("small").action is Action.START
    assert decision.job("huge").action is Action.DEFERRED
    assert "cannot hold 80 GPUs in the cluster" in (decision.job("huge").reason or "")
