"""The whole round's model offers every choice, so an ``optimal`` status is a proof.

A job that may spread over a rack is offered every eligible node there, not
only the nodes of its greedy placement; when a choice is left out (a gang
with two node sizes, more linked GPU sets than are listed) the round is not
called proven.
"""

from __future__ import annotations

from whale_opt.check import check
from whale_opt.cpsat.candidates import free_job
from whale_opt.decision import Action, Status
from whale_opt.options import SolveOptions
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob
from whale_opt.solve import solve
from whale_opt.topology import node_topologies

TYPES = {"H100": GpuType("H100", 80, speed=2.0)}
HEURISTICS = ("fifo", "sjf", "wspt", "best-fit", "frag-aware", "las", "hybrid")


def _spanning_round() -> Instance:
    # n1's one GPU and three of n2's make the 4-GPU rack job's only start now;
    # the greedy plans it later on n2 alone and starts the 1-GPU job on n1.
    nodes = (
        Node("n0", "H100", 1, "nvswitch", cpu=128, memory_gb=1024),
        Node("n1", "H100", 1, "nvswitch", cpu=128, memory_gb=1024),
        Node("n2", "H100", 8, "nvswitch", cpu=128, memory_gb=1024, failed_gpus=(0, 1)),
    )
    running = (RunningJob("r0", ("n0/0",), 1), RunningJob("r1", ("n2/2",), 1))
    queue = (
        QueuedJob("q0", 1, duration_s=1, topology="nvlink"),
        QueuedJob("q1", 2, duration_s=1, weight=2.0, topology="node"),
        QueuedJob("q2", 4, duration_s=1, weight=2.0, topology="rack"),
    )
    return Instance("span", TYPES, nodes, running, queue, policy=Policy(aging_per_hour=0))


def test_a_rack_job_may_span_a_node_its_greedy_placement_left_out() -> None:
    instance = _spanning_round()
    best = solve(instance, "cpsat", SolveOptions(time_limit_s=5, seed=0))
    assert check(instance, best) == []
    assert best.status is Status.OPTIMAL
    spread = best.job("q2")
    assert spread.action is Action.START and {g.split("/")[0] for g in spread.gpu_ids} == {
        "n1",
        "n2",
    }
    for name in HEURISTICS:
        assert best.objective <= solve(instance, name).objective + 1e-6, name


def test_a_gang_over_two_node_sizes_is_not_called_complete() -> None:
    # An 8-GPU NVLink gang fits whole 4-GPU nodes or whole 2-GPU nodes: the
    # model takes one node size, so its choices are not all of the job's.
    nodes = (
        *(Node(f"a{k}", "H100", 4, "nvswitch", rack="r0") for k in range(2)),
        *(Node(f"b{k}", "H100", 2, "nvswitch", rack="r0") for k in range(4)),
    )
    instance = Instance(
        "gang", TYPES, nodes, (), (QueuedJob("g", 8, duration_s=10, topology="nvlink"),)
    )
    timeline = ClusterState(instance, node_topologies(instance))
    item = free_job(instance, timeline, 0, None, len(nodes), whole=True)
    assert item is not None and not item.complete
    narrow = Instance("gang", TYPES, nodes[:2], (), instance.queue)
    timeline = ClusterState(narrow, node_topologies(narrow))
    item = free_job(narrow, timeline, 0, None, 2, whole=True)
    assert item is not None and item.complete
    # The incumbent on one size does not make the other size modelled.
    placed = timeline.best_placement(0)
    assert placed is not None
    timeline = ClusterState(instance, node_topologies(instance))
    item = free_job(instance, timeline, 0, placed, len(nodes), whole=True)
    assert item is not None and not item.complete


def test_a_job_that_fits_one_node_or_a_gang_of_smaller_ones_is_not_called_complete() -> None:
    # The 8-GPU NVLink job may take the 8-GPU node, or (the checker allows it)
    # both whole 4-GPU nodes of the other type; the model offers one node only.
    types = {**TYPES, "A100": GpuType("A100", 80)}
    nodes = (
        Node("big", "H100", 8, "nvswitch", rack="r0"),
        *(Node(f"s{k}", "A100", 4, "nvswitch", rack="r0") for k in range(2)),
    )
    job = QueuedJob("j", 8, duration_s=10, topology="nvlink")
    instance = Instance("either", types, nodes, (), (job,))
    timeline = ClusterState(instance, node_topologies(instance))
    item = free_job(instance, timeline, 0, None, len(nodes), whole=True)
    assert item is not None and not item.complete
    alone = Instance("one", types, nodes[:1], (), (job,))
    timeline = ClusterState(alone, node_topologies(alone))
    item = free_job(alone, timeline, 0, None, 1, whole=True)
    assert item is not None and item.complete
