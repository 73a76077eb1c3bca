"""Replays of random clusters and queues (the public strategies), every decision checked.

A replay runs many rounds on one cluster, so what rounds share (eligibility and
topologies remembered per node tuple) is exercised as no single round can: a
round's answer must not depend on the rounds before it. Each queued job of a
drawn instance becomes a trace job arriving at a drawn time; failures and
drains come from a drawn outage and the MTBF model.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.sim import Outage, SimConfig, TraceJob, simulate
from whale_opt.sim.floor import replay_floor
from whale_opt.testing import instances

from .invariants import CHECKPOINT, assert_invariants

POLICIES = ("wspt", "frag-aware", "las", "cpsat")


def _actual(job: QueuedJob, ratio: float) -> int | None:
    """``ratio`` times ``job``'s estimate (None: it has estimates per type only)."""
    return None if job.duration_s is None else max(1, int(job.duration_s * ratio))


@st.composite
def replays(draw: st.DrawFn) -> tuple[tuple[TraceJob, ...], Instance, SimConfig]:
    instance = draw(
        st.one_of(
            instances(max_nodes=5, max_queue=10, max_running=0, min_queue=1, with_failures=False),
            instances(
                max_nodes=4,
                max_queue=8,
                max_running=0,
                min_queue=1,
                with_failures=False,
                preemption=True,
                sharing=True,
                preferences=True,
            ),
        )
    )
    trace = tuple(
        TraceJob.of(job, draw(st.integers(0, 20_000)), _actual(job, draw(st.floats(0.3, 2.0))))
        for job in instance.queue
    )
    cluster = instance.replace(queue=(), running=())
    outages: tuple[Outage, ...] = ()
    if draw(st.booleans()):
        node = draw(st.sampled_from(cluster.nodes))
        kind = draw(st.sampled_from(["fail", "drain"]))
        outages = (Outage(node.id, draw(st.integers(0, 30_000)), 5_000, kind=kind),)
    config = SimConfig(
        policy=draw(st.sampled_from(POLICIES)),
        time_limit_s=0.05,
        round_period_s=draw(st.sampled_from([None, 3600])),
        checkpoint_interval_s=CHECKPOINT,
        mtbf_node_s=draw(st.sampled_from([None, 20_000.0])),
        outages=outages,
        check_decisions=True,
    )
    return trace, cluster, config


@settings(max_examples=100, deadline=None)
@given(replays())
def test_random_replays_keep_every_rule(
    replay: tuple[tuple[TraceJob, ...], Instance, SimConfig],
) -> None:
    trace, cluster, config = replay
    result = simulate(trace, cluster, config)  # a decision breaking a rule raises
    per_type = any(job.duration_by_type_s for job in trace)  # actuals the helpers can't derive
    if (result.jobs["status"] == "completed").all():
        # No schedule, clairvoyant or preemptive, beats the replay's floor.
        assert replay_floor(trace, cluster, config) <= result.summary["weighted_jct_s"] + 1e-6
        if not per_type:
            assert_invariants(result, trace, cluster)
