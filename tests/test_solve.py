"""One round, one call: the cost model and how a round too long for its limit adapts.

A round returns within its time limit with a decision the checker accepts:
a queue too long for the limit is split into pools when the cluster has
racks to split on, else cut to its head (the rest deferred for a later
round); a bound too costly for the limit is the trivial one.
"""

from __future__ import annotations

import time

import pytest

from whale_opt.bounds import trivial_bound
from whale_opt.budget import TAIL_REASON, bound_fits, head_size, round_cost, split_size
from whale_opt.check import check
from whale_opt.decision import Action
from whale_opt.decompose import split_pays
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob
from whale_opt.registry import get_policy
from whale_opt.solve import LOCAL_WORKERS, solve
from whale_opt.topology import eligible_nodes, node_topologies

SLACK_S = 0.3  # the machine is shared: allow some scheduling noise on top of the limit


def test_round_cost_counts_every_queued_job_times_its_eligible_nodes() -> None:
    instance = generate("hetero", gpus=128, queued=40, seed=2)
    topologies = node_topologies(instance)
    pairs = sum(len(eligible_nodes(instance, k, topologies)) for k in range(len(instance.queue)))
    cost = round_cost(instance)
    assert cost.pairs == pairs
    longer = generate("hetero", gpus=128, queued=400, seed=2)
    assert round_cost(longer).greedy_s > 10 * cost.greedy_s  # more jobs, deeper nodes


def test_a_short_queue_is_neither_split_nor_cut() -> None:
    instance = generate("hetero", gpus=256, queued=30, seed=1)
    assert split_size(instance, 2.0) is None
    assert head_size(instance, wspt_order(instance), 0.5) == len(instance.queue)
    decision = solve(instance, "wspt", time_limit_s=2.0)
    assert not any(item.reason == TAIL_REASON for item in decision.jobs)


def test_a_queue_too_long_for_one_rack_keeps_its_head_within_the_limit() -> None:
    # 8 DGX-1 nodes in one rack: nothing to split on.
    instance = generate("dgx1", gpus=64, queued=1500, seed=1)
    assert split_size(instance, 0.3) is None
    started = time.perf_counter()
    decision = solve(instance, "cpsat", time_limit_s=0.3)
    # Uncut, this round takes about 2 s; cut, the limit (0.3 s) plus noise and, when it
    # runs first, the one-off CP-SAT import (about 0.3 s). The margin tells them apart.
    assert time.perf_counter() - started < 1.2
    assert check(instance, decision) == []
    tail = [item for item in decision.jobs if item.reason == TAIL_REASON]
    assert 0 < len(tail) < len(instance.queue)
    assert all(item.action is Action.DEFERRED for item in tail)
    # The head is the greedy's order: no deferred-for-length job outranks a decided one.
    order = wspt_order(instance)
    cut = {item.id for item in tail}
    ranks = [instance.queue[k].id in cut for k in order]
    assert ranks == sorted(ranks)
    assert decision.bound <= decision.objective


def test_a_queue_too_long_for_the_limit_on_many_racks_is_split_into_pools() -> None:
    instance = generate("hetero", gpus=256, queued=2000, seed=3)
    assert split_size(instance, 1.0) is not None
    started = time.perf_counter()
    decision = solve(instance, "cpsat", time_limit_s=1.0)
    assert time.perf_counter() - started <= 1.0 + SLACK_S
    assert check(instance, decision) == []


def test_a_split_with_no_time_for_its_own_overhead_is_not_made() -> None:
    # At 0.1 s pools sent to workers come back too late to be used (each pool its
    # worker's overhead, then the merge): the round is decided in one piece, its
    # queue cut to the head that fits. With the time, the same round is split.
    instance = generate("hetero", gpus=1024, queued=500, seed=900)
    max_gpus = split_size(instance, 0.1)
    assert max_gpus is not None  # too long for the limit, with racks to split on
    assert not split_pays(instance, 0.1, max_gpus, LOCAL_WORKERS)
    assert split_pays(instance, 5.0, max_gpus, LOCAL_WORKERS)
    decision = solve(instance, "cpsat", time_limit_s=0.1)
    assert "pools" not in decision.stats
    assert 0 < decision.stats["head"] < len(instance.queue)
    assert check(instance, decision) == []


def test_a_bound_too_costly_for_the_limit_is_the_trivial_one() -> None:
    instance = generate("hetero", gpus=256, queued=300, seed=4)
    assert not bound_fits(instance, 1.0)
    decision = solve(instance, "wspt", time_limit_s=1.0)
    assert decision.bound == pytest.approx(trivial_bound(instance))
    assert check(instance, decision) == []
    assert bound_fits(instance, 60.0)


def test_solve_without_a_split_decides_as_the_policy_does() -> None:
    instance = generate("mixed", gpus=64, queued=20, seed=1)
    ours = solve(instance, "wspt", time_limit_s=1.0, split=False)
    theirs = get_policy("wspt").decide(instance, SolveOptions(time_limit_s=1.0))
    assert [(i.id, i.action, i.start_s) for i in ours.jobs] == [
        (i.id, i.action, i.start_s) for i in theirs.jobs
    ]


def test_deferring_is_priced_on_the_types_the_cluster_has() -> None:
    # B is twice as fast but no node has it: deferring must not be priced on it,
    # else deferring (horizon 1,000 + 50 s) beats starting now on A (5,000 s).
    types = {"A": GpuType("A", 80), "B": GpuType("B", 80, speed=2.0)}
    job = QueuedJob("j", 1, 100, duration_by_type_s=(("A", 5_000),))
    instance = Instance(
        "absent-type", types, (Node("a0", "A", 1),), queue=(job,), policy=Policy(horizon_s=1_000)
    )
    assert instance.deferred_cost_end(0) == 1_000 + 5_000
    for solver in ("wspt", "cpsat"):
        decision = solve(instance, solver, SolveOptions(time_limit_s=2, seed=0))
        assert check(instance, decision) == []
        assert decision.job("j").action is Action.START, solver


@pytest.mark.parametrize("solver", ["cpsat", "wspt", "frag-aware", "las", "best-fit"])
def test_a_gang_no_nodes_could_hold_together_is_deferred_as_unservable(
    solver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A 16-GPU NVLink gang on two 8-GPU nodes of two racks, and a gang of 2**62
    GPUs, never run: deferred with that reason, the rest placed. (The huge gang
    once entered CP-SAT's model and overflowed it.)"""
    types = {"A": GpuType("A", 80)}
    nodes = (Node("n0", "A", 8, "nvswitch", rack="r0"), Node("n1", "A", 8, "nvswitch", rack="r1"))
    queue = (
        QueuedJob("split", 16, 600),
        QueuedJob("huge", 2**62, 600, topology="any"),
        QueuedJob("fits", 8, 600),
    )
    instance = Instance("gangs", types, nodes, queue=queue)
    decision = solve(instance, solver, time_limit_s=1.0)
    assert check(instance, decision) == []
    by_id = {item.id: item for item in decision.jobs}
    reasons = {
        "split": "16 NVLink-connected GPUs on whole NVLink-connected nodes of one size in one rack",
        "huge": f"{2**62} GPUs in the cluster",
    }
    for job_id, what in reasons.items():
        assert by_id[job_id].action is Action.DEFERRED
        assert by_id[job_id].reason == f"the healthy nodes of type A cannot hold {what}"
    assert by_id["fits"].action is Action.START
    assert "search failed" not in caplog.text
