"""The baseline policies: valid on named and generated instances, and each does what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from whale_opt.check import check
from whale_opt.decision import Action, Decision
from whale_opt.io import read_instance
from whale_opt.policies.hybrid import HybridPolicy
from whale_opt.policies.las import LasPolicy
from whale_opt.policies.sjf import SjfPolicy
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob
from whale_opt.registry import REGISTRY, get_policy
from whale_opt.testing import instances

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
HEURISTICS = sorted(name for name in REGISTRY if name not in ("cpsat", "learned"))
NAMED = [
    "small/two-racks-mixed.json",
    "small/mixed-64g-24q.json",
    "fragmented/fragmented-256g-120q.json",
]
HOUR = 3600


@pytest.fixture(scope="module", params=NAMED)
def named(request: pytest.FixtureRequest) -> Instance:
    """Each named instance, read once per module."""
    return read_instance(INSTANCES / request.param)


@pytest.mark.parametrize("name", HEURISTICS)
def test_decision_on_named_instances_passes_the_checker(name: str, named: Instance) -> None:
    decision = get_policy(name).decide(named)
    assert check(named, decision) == []
    assert decision.bound <= decision.objective
    assert {item.id for item in decision.jobs} >= {job.id for job in named.queue}


@settings(max_examples=20, deadline=None)
@given(instances(max_nodes=4, max_queue=6))
def test_every_policy_decision_passes_the_checker(instance: Instance) -> None:
    for name in HEURISTICS:
        decision = get_policy(name).decide(instance)
        assert check(instance, decision) == [], name
        assert decision.bound <= decision.objective * (1 + 1e-9) + 1e-6, name


def test_registry_names_and_alias() -> None:
    assert set(REGISTRY) == {
        "fifo",
        "sjf",
        "wspt",
        "greedy",
        "best-fit",
        "frag-aware",
        "las",
        "hybrid",
        "cpsat",
        "learned",
    }
    assert REGISTRY["greedy"] is REGISTRY["wspt"]
    for name in HEURISTICS:
        if name != "greedy":
            assert get_policy(name).name == name


# -- behaviour on hand-made rounds ------------------------------------------------


def one_round(
    queue: list[QueuedJob],
    nodes: tuple[Node, ...] = (Node("n0", "a100", 4, "nvswitch"),),
    running: tuple[RunningJob, ...] = (),
) -> Instance:
    """A round on A100 nodes (default: one 4-GPU NVSwitch node)."""
    return Instance(
        name="hand-made",
        gpu_types={"a100": GpuType("a100", 80.0)},
        nodes=nodes,
        running=running,
        queue=tuple(queue),
    )


def started(decision: Decision) -> list[str]:
    """Ids of the jobs that start now."""
    return [item.id for item in decision.by_action(Action.START)]


def test_fifo_starts_the_earliest_submitted_job_when_only_one_fits() -> None:
    # "a" is shorter and heavier (WSPT would take it), but "b" came first.
    instance = one_round(
        [
            QueuedJob("a", 4, duration_s=60, weight=4.0, submitted_at=-10),
            QueuedJob("b", 4, duration_s=6000, submitted_at=-100),
        ]
    )
    assert started(get_policy("fifo").decide(instance)) == ["b"]
    assert started(get_policy("wspt").decide(instance)) == ["a"]


def test_sjf_starts_the_shortest_job() -> None:
    instance = one_round(
        [
            QueuedJob("long", 4, duration_s=6000, weight=4.0, submitted_at=-100),
            QueuedJob("short", 4, duration_s=600, submitted_at=-10),
        ]
    )
    assert started(get_policy("sjf").decide(instance)) == ["short"]


def test_sjf_judges_a_job_by_its_fastest_eligible_type() -> None:
    instance = Instance(
        name="hand-made",
        gpu_types={"slow": GpuType("slow", 80.0), "fast": GpuType("fast", 80.0, speed=2.0)},
        nodes=(Node("n0", "slow", 4), Node("n1", "fast", 4)),
        queue=(
            QueuedJob("slow-only", 4, duration_s=600, gpu_types=("slow",), submitted_at=-100),
            QueuedJob("any", 4, duration_s=1000, submitted_at=-10),  # 500 s on "fast"
        ),
    )
    assert SjfPolicy().order(instance) == [1, 0]


def test_las_puts_low_attained_service_before_high() -> None:
    jobs = [
        QueuedJob("veteran", 4, duration_s=600, submitted_at=-500, attained_gpu_s=4 * HOUR),
        QueuedJob("newcomer", 4, duration_s=600, submitted_at=-10),
    ]
    instance = one_round(jobs)
    assert started(get_policy("las").decide(instance)) == ["newcomer"]
    # Both below a higher threshold: one queue, FIFO inside it.
    assert started(LasPolicy(threshold_gpu_s=5 * HOUR).decide(instance)) == ["veteran"]


def test_las_is_fifo_inside_the_second_queue() -> None:
    instance = one_round(
        [
            QueuedJob("less", 4, duration_s=600, submitted_at=-10, attained_gpu_s=2 * HOUR),
            QueuedJob("more", 4, duration_s=600, submitted_at=-500, attained_gpu_s=9 * HOUR),
        ]
    )
    # Discretised: both are past the threshold, so the earlier submission goes first.
    assert started(get_policy("las").decide(instance)) == ["more"]


def test_hybrid_ages_a_long_waiting_job_past_a_fresh_heavy_one() -> None:
    # Rate: 1 weight unit per hour waited. Fresh weight 4 vs weight 1 + hours waited.
    # The policy's own aging applies where the instance sets none: set it to 0.
    def round_with(waited_h: float) -> Instance:
        return one_round(
            [
                QueuedJob("fresh-heavy", 4, duration_s=600, weight=4.0, submitted_at=0),
                QueuedJob("old-light", 4, duration_s=600, submitted_at=-int(waited_h * HOUR)),
            ]
        ).replace(policy=Policy(aging_per_hour=0.0))

    assert HybridPolicy.AGING_PER_HOUR == 1.0
    assert started(get_policy("hybrid").decide(round_with(2))) == ["fresh-heavy"]  # 3 < 4
    assert started(get_policy("hybrid").decide(round_with(4))) == ["old-light"]  # 5 > 4
    assert started(HybridPolicy(aging_per_hour=0.5).decide(round_with(4))) == ["fresh-heavy"]


def test_frag_aware_keeps_a_cube_mesh_quad_whole() -> None:
    instance = one_round(
        [QueuedJob("pair", 2, duration_s=600)],
        nodes=(Node("dgx1", "a100", 8, "hybrid-cube-mesh"),),
    )
    (item,) = get_policy("frag-aware").decide(instance).by_action(Action.START)
    used = {int(gpu.rsplit("/", 1)[1]) for gpu in item.gpu_ids}
    quads = [{0, 1, 2, 3}, {4, 5, 6, 7}]
    assert len(used) == 2
    assert any(used <= quad for quad in quads)  # inside one quad
    assert any(not used & quad for quad in quads)  # the other quad whole


def test_best_fit_picks_the_node_with_the_fewest_free_gpus_that_fits() -> None:
    nodes = tuple(Node(f"n{k}", "a100", 8, "nvswitch") for k in range(3))
    running = (
        RunningJob("r1", tuple(f"n1/{i}" for i in range(6)), remaining_s=5000),  # 2 free
        RunningJob("r2", tuple(f"n2/{i}" for i in range(4)), remaining_s=5000),  # 4 free
    )
    jobs = [QueuedJob("three", 3, duration_s=600), QueuedJob("two", 2, duration_s=600)]
    decision = get_policy("best-fit").decide(one_round(jobs, nodes, running))
    placed = {item.id: {g.split("/")[0] for g in item.gpu_ids} for item in decision.jobs}
    assert placed["three"] == {"n2"}  # n1 is too small, n2 is tighter than n0
    assert placed["two"] == {"n1"}


def test_best_fit_places_the_largest_gang_first_unlike_fifo() -> None:
    instance = one_round(
        [
            QueuedJob("small", 2, duration_s=600, submitted_at=-100),
            QueuedJob("big", 4, duration_s=600, submitted_at=-10),
        ]
    )
    assert started(get_policy("best-fit").decide(instance)) == ["big"]
    assert started(get_policy("fifo").decide(instance)) == ["small"]


def test_frag_aware_does_not_break_the_only_whole_node() -> None:
    nodes = (Node("half", "a100", 8, "nvswitch"), Node("empty", "a100", 8, "nvswitch"))
    running = (RunningJob("r", tuple(f"half/{i}" for i in range(4)), remaining_s=9000),)
    jobs = [QueuedJob("pair", 2, duration_s=600), QueuedJob("eight", 8, duration_s=600)]
    decision = get_policy("frag-aware").decide(one_round(jobs, nodes, running))
    assert started(decision) == ["pair", "eight"]
