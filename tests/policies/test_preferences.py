"""Soft preferences in the greedy's placement: honoured when cheap, dropped (and said
so) when honouring costs more than the penalty."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob
from whale_opt.registry import REGISTRY, get_policy

HEURISTICS = sorted(name for name in REGISTRY if name not in ("cpsat", "greedy", "learned"))
TYPES = {"a100": GpuType("a100", 80.0), "h100": GpuType("h100", 80.0, speed=2.0)}


def round_of(
    nodes: tuple[Node, ...],
    *queue: QueuedJob,
    running: tuple[RunningJob, ...] = (),
    policy: Policy | None = None,
) -> Instance:
    return Instance(
        name="preferences",
        gpu_types=TYPES,
        nodes=nodes,
        running=running,
        queue=queue,
        policy=policy or Policy(),
    )


def holding(job_id: str, node: str, count: int, remaining_s: int) -> RunningJob:
    return RunningJob(job_id, tuple(f"{node}/{i}" for i in range(count)), remaining_s)


def placed(
    instance: Instance, name: str = "wspt", job_id: str = "j"
) -> tuple[Decision, JobDecision]:
    decision = get_policy(name).decide(instance)
    assert check(instance, decision) == [], name
    return decision, decision.job(job_id)


def nodes_of(item: JobDecision) -> set[str]:
    return {gpu.rpartition("/")[0] for gpu in item.gpu_ids} or set(item.nodes)


EAST_WEST = (
    Node("w0", "a100", 8, "nvswitch", rack="r1", zone="west"),
    Node("e0", "a100", 8, "nvswitch", rack="r0", zone="east"),
)


@pytest.mark.parametrize("name", HEURISTICS)
def test_zone_is_honoured_when_a_node_there_is_free(name: str) -> None:
    # w0 comes first in the node list (and ties break to it): the zone moves the job.
    instance = round_of(EAST_WEST, QueuedJob("j", 4, 100, zone="east"))
    decision, item = placed(instance, name)
    assert item.action is Action.START and nodes_of(item) == {"e0"}
    assert item.dropped == () and decision.objective == 100


def test_zone_is_dropped_with_a_reason_when_waiting_costs_more_than_the_penalty() -> None:
    # East is busy for 5000 s: waiting costs 5000 weighted s, the penalty 3600.
    busy = (holding("r", "e0", 8, 5000),)
    instance = round_of(EAST_WEST, QueuedJob("j", 4, 100, zone="east"), running=busy)
    decision, item = placed(instance)
    assert item.action is Action.START and nodes_of(item) == {"w0"}
    ((preference, reason),) = item.dropped
    assert preference == "zone" and "east" in reason and "3600" in reason
    assert decision.objective == 100 + 3600


def test_zone_waits_when_waiting_is_cheaper_than_the_penalty() -> None:
    busy = (holding("r", "e0", 8, 500),)
    instance = round_of(EAST_WEST, QueuedJob("j", 4, 100, zone="east"), running=busy)
    decision, item = placed(instance)
    assert item.action is Action.PLANNED and item.nodes == ("e0",) and item.start_s == 500
    assert item.dropped == () and decision.objective == 600


def test_a_larger_weight_does_not_change_the_trade_off() -> None:
    # Both the wait and the penalty scale with the effective weight (online: x10).
    busy = (holding("r", "e0", 8, 500),)
    job = QueuedJob("j", 4, 100, zone="east", priority_class="online")
    decision, item = placed(round_of(EAST_WEST, job, running=busy))
    assert item.action is Action.PLANNED and decision.objective == 10 * 600


def test_preferred_gpu_type_beats_a_faster_one_within_the_penalty() -> None:
    nodes = (Node("h0", "h100", 8, "nvswitch"), Node("a0", "a100", 8, "nvswitch"))
    job = QueuedJob("j", 4, 1000, preferred_gpu_types=("a100",))
    decision, item = placed(round_of(nodes, job))
    assert nodes_of(item) == {"a0"} and item.dropped == ()
    assert decision.objective == 1000  # not 500 on H100 + 3600
    # With a cheap penalty the faster type wins, and the decision says what it dropped.
    cheap = round_of(nodes, job, policy=Policy(gpu_type_penalty_s=100))
    decision, item = placed(cheap)
    assert nodes_of(item) == {"h0"} and [name for name, _ in item.dropped] == ["gpu_type"]
    assert decision.objective == 500 + 100


def test_zone_and_type_together_take_the_node_that_honours_both() -> None:
    nodes = (
        Node("h-west", "h100", 8, "nvswitch", rack="r0", zone="west"),
        Node("a-west", "a100", 8, "nvswitch", rack="r0", zone="west"),
        Node("h-east", "h100", 8, "nvswitch", rack="r1", zone="east"),
        Node("a-east", "a100", 8, "nvswitch", rack="r1", zone="east"),
    )
    job = QueuedJob("j", 2, 100, zone="east", preferred_gpu_types=("a100",))
    _, item = placed(round_of(nodes, job))
    assert nodes_of(item) == {"a-east"} and item.dropped == ()


PCIE_AND_SWITCH = (
    Node("pcie", "a100", 4, "pcie"),  # the tighter fit
    Node("switch", "a100", 8, "nvswitch"),
)


@pytest.mark.parametrize("name", HEURISTICS)
def test_prefer_nvlink_moves_a_node_job_onto_linked_gpus(name: str) -> None:
    plain = QueuedJob("j", 4, 100, topology="node")
    _, item = placed(round_of(PCIE_AND_SWITCH, plain), name)
    assert nodes_of(item) == {"pcie"}  # best fit without the preference
    linked = QueuedJob("j", 4, 100, topology="node", prefer_nvlink=True)
    _, item = placed(round_of(PCIE_AND_SWITCH, linked), name)
    assert nodes_of(item) == {"switch"} and item.dropped == ()


@pytest.mark.parametrize("name", HEURISTICS)
def test_an_nvlink_shaped_try_and_an_nvlink_job_do_not_share_their_nodes(name: str) -> None:
    # Rounds of one cluster share what eligibility found per job shape. An 8-GPU
    # `node` job preferring NVLink tries the shape "nvlink, 8 GPUs" on its own nodes
    # (here none: the big node is PCIe); a real 8-GPU NVLink job may take the two
    # linked 4-GPU nodes as a gang. Neither answer may leak into the other, in
    # either order.
    nodes = (
        Node("big", "a100", 8, "pcie"),
        Node("s0", "a100", 4, "nvswitch"),
        Node("s1", "a100", 4, "nvswitch"),
    )
    node_job = QueuedJob("j", 8, 100, topology="node", prefer_nvlink=True)
    gang = QueuedJob("j", 8, 100, topology="nvlink")
    for first, second in ((gang, node_job), (node_job, gang)):
        placed(round_of(nodes, first), name)
        _, item = placed(round_of(nodes, second), name)
        expected = {"big"} if second is node_job else {"s0", "s1"}
        assert item.action is Action.START and nodes_of(item) == expected


def test_prefer_nvlink_picks_a_linked_pair_inside_a_node() -> None:
    # A "pairs" node with GPU 0 busy: 1+2 would be picked without the preference
    # (lowest ids among equal leftovers), 2+3 is the linked pair.
    nodes = (Node("p0", "a100", 4, "pairs"),)
    busy = (holding("r", "p0", 1, 5000),)
    _, item = placed(round_of(nodes, QueuedJob("j", 2, 100, topology="node"), running=busy))
    assert item.gpu_ids == ("p0/1", "p0/2")
    job = QueuedJob("j", 2, 100, topology="node", prefer_nvlink=True)
    _, item = placed(round_of(nodes, job, running=busy))
    assert item.gpu_ids == ("p0/2", "p0/3") and item.dropped == ()


def test_prefer_nvlink_is_dropped_when_only_scattered_gpus_are_free_now() -> None:
    # Only a PCIe node is free now; the NVSwitch node frees in 10,000 s > 3600.
    nodes = (Node("switch", "a100", 8, "nvswitch"), Node("pcie", "a100", 8, "pcie"))
    busy = (holding("r", "switch", 8, 10_000),)
    job = QueuedJob("j", 4, 100, topology="any", prefer_nvlink=True)
    decision, item = placed(round_of(nodes, job, running=busy))
    assert nodes_of(item) == {"pcie"} and [name for name, _ in item.dropped] == ["nvlink"]
    assert decision.objective == 100 + 3600
