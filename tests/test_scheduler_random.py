"""The round API driven by random events on random clusters (the public strategies).

What a controller sees between rounds, in any order: jobs finish, arrive, nodes
go down and come back, drain, single GPUs fail. Every round's snapshot must be
a valid instance (lost jobs included: running when their hardware failed) and
every decision must pass the checker against it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.scheduler import Scheduler
from whale_opt.testing import instances

KINDS = ("finish", "down", "up", "drain", "undrain", "gpu", "gpu-back", "submit")
Event = tuple[str, int, int]  # kind, seconds after the round, which (an index, wrapped)


def _happen(scheduler: Scheduler, event: Event, step: int) -> None:
    """Carry out ``event``, the ``step``-th, on ``scheduler``'s cluster (no-op when
    nothing fits it)."""
    kind, _, which = event
    nodes = sorted(scheduler.nodes)
    node = nodes[which % len(nodes)]
    if kind == "finish" and scheduler.running:
        scheduler.finish(sorted(scheduler.running)[which % len(scheduler.running)])
    elif kind in ("down", "up"):
        scheduler.set_node_down(node, kind == "down")
    elif kind in ("drain", "undrain"):
        scheduler.drain(node, kind == "drain")
    elif kind in ("gpu", "gpu-back"):
        index = which % scheduler.nodes[node].gpu_count
        scheduler.fail_gpu(f"{node}/{index}", kind == "gpu")
    elif kind == "submit":
        gpus, topology = (0, 1, 2, 4, 8)[which % 5], ("nvlink", "any", "node", "rack")[which % 4]
        scheduler.submit(QueuedJob(f"new-{step}", gpus, 600, topology=topology))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        instances(max_nodes=4, max_queue=6, max_running=5),
        instances(max_nodes=4, max_queue=5, preemption=True, sharing=True, draining=True),
    ),
    st.sampled_from(["wspt", "frag-aware", "las", "cpsat"]),
    st.lists(
        st.tuples(st.sampled_from(KINDS), st.sampled_from([1, 60, 3600]), st.integers(0, 63)),
        max_size=6,
    ),
)
def test_every_round_of_random_events_is_valid(
    cluster: Instance, policy: str, events: list[Event]
) -> None:
    scheduler = Scheduler(cluster, policy, options=SolveOptions(time_limit_s=0.05))
    now = cluster.now
    for step, event in enumerate([*events, ("submit", 0, 0)]):
        snapshot = scheduler.snapshot(now)  # raises if the state is no valid instance
        decision = scheduler.propose(now, snapshot)
        assert check(snapshot, decision) == []
        scheduler.apply(decision, now)
        now += event[1]
        _happen(scheduler, event, step)
