"""Interchangeable idle nodes are offered as prefixes, and the round's optimum stays.

A whole round's model offers each job only a prefix of each class of alike
idle nodes (:mod:`whale_opt.cpsat.symmetry`). The tests solve random small
rounds to optimality with and without that reduction and compare the optima,
check that the incumbent mapped onto the prefixes is the same decision, and
that the pre-listing estimate of the model's choices is never below what is
listed.
"""

from __future__ import annotations

import random
import time

import pytest

from whale_opt.check import check
from whale_opt.cpsat import neighbourhood
from whale_opt.cpsat.lns import LnsStats, exact_round, whole_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.cpsat.symmetry import Interchangeable, whole_pairs
from whale_opt.decision import Action, JobDecision, Status, objective
from whale_opt.generate import generate
from whale_opt.placement.records import to_placement
from whale_opt.placement.serial import assemble
from whale_opt.problem_data import Instance, RunningJob
from whale_opt.solve import wspt_greedy

from .builders import A100, H100, holding, job, node, round_of

TOLERANCE = 1e-6


def _random_round(seed: int) -> Instance:
    """Alike idle nodes in two racks and two zones, two busy ones, and more work
    than fits now (every topology, some jobs held to H100)."""
    rng = random.Random(seed)
    nodes = [node(f"a{k}", 4, rack=f"r{k % 2}", zone="z0" if k < 4 else "z1") for k in range(6)]
    nodes += [node(f"h{k}", 4, gpu_type=H100.name, rack="r0") for k in range(3)]
    nodes += [node("b0", 4, rack="r0"), node("b1", 4, gpu_type=H100.name, rack="r1")]
    running = [holding("r0", "b0", (0, 1), 700), holding("r1", "b1", (0,), 300)]
    queue = []
    for k in range(rng.randint(4, 7)):
        topology = rng.choice(("nvlink", "any", "rack", "node"))
        fields = {"weight": rng.choice((1.0, 2.0, 5.0))}
        if rng.random() < 0.3:
            fields["gpu_types"] = (H100.name,)
        if rng.random() < 0.3:
            fields["zone"] = "z1"
        gpus = rng.choice((1, 2, 4, 8))
        queue.append(job(f"q{k}", gpus, rng.randint(200, 3000), topology=topology, **fields))
    return round_of(nodes, queue, running, aging_per_hour=0)


def _exact(instance: Instance, jobs: list[JobDecision] | None = None) -> tuple[float, bool]:
    """The whole round's model from ``jobs`` (default: the greedy's): its value and
    whether it was proven."""
    jobs = wspt_greedy(instance) if jobs is None else jobs
    preset = load_preset(None)
    _, value, proven = exact_round(
        instance,
        jobs,
        objective(instance, jobs),
        time.perf_counter() + 20,
        preset,
        preset.parameters,
        0,
        LnsStats(),
    )
    return value, proven


def _hood_pairs(instance: Instance) -> int:
    jobs = wspt_greedy(instance)
    hood, _, _ = whole_neighbourhood(instance, jobs)
    return sum(len(item.nodes) for item in hood.jobs)


@pytest.mark.parametrize("seed", range(10))
def test_offering_prefixes_of_alike_idle_nodes_keeps_the_rounds_optimum(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = _random_round(seed)
    reduced, proven = _exact(instance)
    fewer = _hood_pairs(instance)
    with monkeypatch.context() as patch:
        patch.setattr(neighbourhood, "_interchangeable", lambda *a: Interchangeable([], []))
        full, full_proven = _exact(instance)
        assert _hood_pairs(instance) > fewer  # the reduction offered fewer choices
    assert proven and full_proven
    assert abs(reduced - full) <= TOLERANCE * max(1.0, full)


def test_the_incumbent_moved_onto_the_prefixes_is_the_same_decision() -> None:
    for seed in range(10):
        instance = _random_round(seed)
        jobs = wspt_greedy(instance)
        hood, _, _ = whole_neighbourhood(instance, jobs)
        moved = [*hood.incumbent.values(), *(item for item in jobs if item.action is Action.KEEP)]
        assert check(instance, assemble(instance, "moved", moved, Status.FEASIBLE, 0, 0)) == []
        assert abs(objective(instance, moved) - objective(instance, jobs)) <= TOLERANCE
        offered = {item.position: set(item.nodes) for item in hood.jobs}
        for position, item in hood.incumbent.items():
            placement = to_placement(instance, position, item)
            if placement is not None:
                assert set(placement.nodes) <= offered[position], (seed, item)


def test_alike_nodes_split_by_rack_only_when_a_job_keeps_to_a_rack() -> None:
    nodes = [node(f"a{k}", 4, rack=f"r{k % 2}") for k in range(4)]
    singles = round_of(nodes, [job("q0", 2), job("q1", 1)])
    assert _hood_pairs(singles) == 1 + 2  # one class: the first node, then the first two
    gang = round_of(nodes, [job("q0", 2), job("q1", 8, topology="nvlink")])
    # Two classes (one per rack): q0 one node of each, the gang all (1 + 2 nodes each).
    assert _hood_pairs(gang) == 2 + 4
    zones = [node(f"a{k}", 4, zone=f"z{k % 2}") for k in range(4)]
    assert _hood_pairs(round_of(zones, [job("q0", 2), job("q1", 1)])) == 2 + 4


def test_a_busy_node_is_in_no_class() -> None:
    nodes = [node(f"a{k}", 4) for k in range(3)]
    busy = round_of(nodes, [job("q0", 2)], [holding("r0", "a2", (0,), 100)])
    assert _hood_pairs(busy) == 1 + 1  # a0 for the class {a0, a1}, and a2 on its own


def test_a_node_whose_running_job_uses_nothing_is_not_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A running CPU-only job asking for no CPU or memory uses nothing on b, but its
    # end at 100 releases b for a planned NVLink job (the release rule), so a and b
    # are not alike: j2 planned on b at 500 (the quota holds it) is the optimum.
    nodes = [node("a", 4, nvlink="pairs"), node("b", 4, nvlink="pairs")]
    nodes.append(node("c", 4, gpu_type=H100.name))
    running = [RunningJob("c0", (), 100, node="b", tenant="t")]
    queue = [
        job("j1", 2, 1000, gpu_types=(H100.name,), weight=10, tenant="t"),
        job("j2", 2, 1000, gpu_types=(A100.name,), weight=1, tenant="t"),
    ]
    instance = round_of(nodes, queue, running, quotas={"t": 2}, aging_per_hour=0)
    worse = [  # valid, and far from the optimum: j2 deferred
        JobDecision("j1", Action.START, gpu_ids=("c/0", "c/1"), start_s=0, end_s=500),
        JobDecision("j2", Action.DEFERRED, reason="a start later"),
        JobDecision("c0", Action.KEEP),
    ]
    assert check(instance, assemble(instance, "worse", worse, Status.FEASIBLE, 0, 0)) == []
    found = _exact(instance, worse)
    with monkeypatch.context() as patch:
        patch.setattr(neighbourhood, "_interchangeable", lambda *a: Interchangeable([], []))
        assert found == _exact(instance, worse) == (6500.0, True)


def test_the_estimate_counts_every_size_a_gang_could_take() -> None:
    # The 16-GPU gang fits two busy 8-GPU nodes later or four idle 4-GPU ones now:
    # the model keeps to its incumbent's size, which the estimate cannot know.
    nodes = [node("big0", 8), node("big1", 8), *(node(f"s{k}", 4) for k in range(6))]
    running = [holding(f"r{k}", f"big{k}", range(8), 50_000) for k in range(2)]
    instance = round_of(nodes, [job("q0", 16, topology="nvlink")], running)
    assert _hood_pairs(instance) == 4
    assert whole_pairs(instance) == (1, 8)


@pytest.mark.parametrize("family", ["hetero", "mixed", "dgx1", "fragmented"])
def test_the_estimate_before_listing_is_never_below_the_listed_choices(family: str) -> None:
    instance = generate(family, gpus=256, queued=12, seed=11)
    idle = instance.replace(running=instance.running[: len(instance.running) // 3])
    for case in (instance, idle):
        hosted, pairs = whole_pairs(case)
        assert hosted <= len(case.queue)
        assert pairs >= _hood_pairs(case)
