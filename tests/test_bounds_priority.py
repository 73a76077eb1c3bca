"""Lower bounds under priority classes, aging, draining nodes and preferences."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.bounds import lower_bound, trivial_bound
from whale_opt.check import check
from whale_opt.decision import Status
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob
from whale_opt.registry import get_policy
from whale_opt.testing import instances

TYPES = {"a100": GpuType("a100", 80.0)}
HOUR = 3600


def round_of(
    *queue: QueuedJob,
    nodes: tuple[Node, ...] = (Node("n0", "a100", 8, "nvswitch"),),
    running: tuple[RunningJob, ...] = (),
    policy: Policy | None = None,
) -> Instance:
    return Instance("bounds", TYPES, nodes, running, queue, policy=policy or Policy())


@pytest.mark.parametrize(
    ("job", "policy", "value"),
    [
        (QueuedJob("q", 1, 100, priority_class="best-effort"), Policy(), 0.1 * 100),
        (QueuedJob("q", 1, 100, priority_class="online"), Policy(), 10 * 100),
        (QueuedJob("q", 1, 100, submitted_at=-2 * HOUR), Policy(aging_per_hour=0.5), 2 * 100),
    ],
)
def test_bounds_price_jobs_at_their_effective_weight(
    job: QueuedJob, policy: Policy, value: float
) -> None:
    instance = round_of(job, policy=policy)
    decision = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []
    # One job on an idle node: the bound is exact, class factor and aging included.
    assert lower_bound(instance) == pytest.approx(value)
    assert trivial_bound(instance) == pytest.approx(value)
    assert decision.objective == pytest.approx(value) == decision.bound


def test_draining_nodes_offer_no_capacity() -> None:
    nodes = (Node("n0", "a100", 8, "nvswitch"), Node("n1", "a100", 8, "nvswitch", draining=True))
    jobs = (QueuedJob("a", 8, 1000), QueuedJob("b", 8, 1000))
    instance = round_of(*jobs, nodes=nodes)
    decision = get_policy("wspt").decide(instance)
    assert check(instance, decision) == [] and decision.objective == 3000  # one after the other
    # Both nodes open, both jobs could run at once (2000): draining makes the bound tighter.
    opened = round_of(*jobs, nodes=(nodes[0], replace(nodes[1], draining=False)))
    assert lower_bound(opened) == pytest.approx(2000)
    assert 2000 < lower_bound(instance) <= decision.objective


def test_bound_frees_only_what_a_queued_job_may_preempt() -> None:
    jobs = (QueuedJob("a", 8, 1000),)
    serving = (RunningJob("api", tuple(f"n0/{i}" for i in range(8)), 500, priority_class="online"),)
    instance = round_of(*jobs, running=serving, policy=Policy(allow_preemption=True))
    assert lower_bound(instance) == pytest.approx(1500)  # online is never preempted
    spot = (replace(serving[0], priority_class="best-effort"),)
    # Preempting it may pay: the bound counts its GPUs free, and is still not 0.
    assert lower_bound(instance.replace(running=spot)) == pytest.approx(1000)
    # A job of its own class may not displace it: its GPUs stay busy in the bound.
    peer = (replace(serving[0], priority_class="training"),)
    assert lower_bound(instance.replace(running=peer)) == pytest.approx(1500)


@st.composite
def priority_rounds(draw: st.DrawFn) -> Instance:
    """Small generated rounds with classes, aging, draining and soft preferences."""
    instance = draw(instances(max_nodes=3, max_queue=4, max_running=2))
    classes = sorted(instance.priority_classes)
    queue = tuple(
        replace(
            job,
            priority_class=draw(st.sampled_from(classes)),
            prefer_nvlink=draw(st.booleans()),
            preferred_gpu_types=tuple(draw(st.sets(st.sampled_from(sorted(instance.gpu_types))))),
        )
        for job in instance.queue
    )
    nodes = tuple(
        replace(n, draining=draw(st.sampled_from([False, False, True]))) for n in instance.nodes
    )
    policy = replace(
        instance.policy,
        allow_preemption=False,
        aging_per_hour=draw(st.sampled_from([0.0, 0.5, 24.0])),
    )
    return instance.replace(queue=queue, nodes=nodes, policy=policy)


@settings(max_examples=25, deadline=None)
@given(priority_rounds())
def test_bound_is_below_every_serial_schedule(instance: Instance) -> None:
    bound = lower_bound(instance)
    for order in itertools.permutations(range(len(instance.queue))):
        jobs = list_schedule(instance, order)
        decision = assemble(instance, "brute", jobs, Status.FEASIBLE, 0.0, 0.0)
        assert check(instance, decision) == [], order
        assert bound <= decision.objective * (1 + 1e-9) + 1e-6, order
