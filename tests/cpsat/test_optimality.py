"""CP-SAT against brute force on tiny rounds, and on rounds whose optimum is known.

The brute force list-schedules every queue order (``list_schedule``: each
job at its earliest-ending place) and keeps the cheapest: the optimum over
serial schedules, so an upper bound on the true optimum. A proven lower
bound above it, or a decision claimed optimal that it beats, is a bug.
"""

from __future__ import annotations

import itertools
import random
import time

import pytest

from whale_opt.bounds import lower_bound
from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.problem_data import Instance, Node, QueuedJob, RunningJob
from whale_opt.registry import get_policy

from .builders import (
    A100,
    H100,
    TOLERANCE,
    gpu_ids,
    holding,
    job,
    node,
    round_of,
    solve,
    solve_round,
)

RANDOM_ROUNDS = 30
RANDOM_TIME_LIMIT_S = 0.25


def brute_force(instance: Instance) -> Decision:
    """The cheapest list schedule over every queue order (checked valid)."""
    started = time.perf_counter()
    best = None
    for order in itertools.permutations(range(len(instance.queue))):
        jobs = list_schedule(instance, order)
        if best is None or objective(instance, jobs) < objective(instance, best):
            best = jobs
    assert best is not None
    decision = assemble(instance, "brute", best, Status.FEASIBLE, 0.0, started)
    assert check(instance, decision) == []
    return decision


def _random_nodes(rng: random.Random) -> list[Node]:
    nodes = []
    for k in range(rng.randint(1, 3)):
        gpus = rng.choice([2, 4, 8, 8])
        layouts = ["nvswitch", "pcie", "pairs"] + (["hybrid-cube-mesh"] * 2 if gpus == 8 else [])
        nodes.append(
            node(
                f"n{k}",
                gpus,
                rng.choice(layouts),
                gpu_type=rng.choice([A100.name, A100.name, H100.name]),
                rack=rng.choice(["r0", "r1"]),
                cpu=rng.choice([32, 64, 256]),
                memory_gb=rng.choice([256, 2048]),
            )
        )
    return nodes


def _random_running(rng: random.Random, nodes: list[Node]) -> list[RunningJob]:
    running = []
    for k, host in enumerate(rng.sample(nodes, rng.randint(0, len(nodes)))):
        held = rng.sample(range(host.gpu_count), rng.randint(1, host.gpu_count))
        running.append(
            holding(
                f"r{k}",
                host.id,
                sorted(held),
                rng.randint(1, 3000),
                tenant=rng.choice(["nlp", "cv"]),
                cpu=rng.choice([0, 8]),
            )
        )
    return running


def _random_queue(rng: random.Random) -> list[QueuedJob]:
    queue = []
    for k in range(rng.randint(1, 4)):
        gpus = rng.choice([1, 2, 3, 4, 8, 16])
        queue.append(
            job(
                f"q{k}",
                gpus,
                rng.randint(50, 3000),
                topology=rng.choice(["nvlink", "nvlink", "node", "rack", "any"]),
                weight=rng.choice([0.5, 1.0, 2.0, 3.0]),
                tenant=rng.choice(["nlp", "cv"]),
                cpu=float(rng.choice([0, 0, 4, 16]) * gpus),
                zone=rng.choice([None, None, "east"]),
            )
        )
    return queue


def random_round(seed: int) -> Instance:
    """A tiny seeded round: 1-3 nodes of <= 8 GPUs, some running, 1-4 queued jobs."""
    rng = random.Random(seed)
    nodes = _random_nodes(rng)
    quotas = {"nlp": rng.choice([4, 8, 12])} if rng.random() < 0.3 else None
    return round_of(
        nodes,
        _random_queue(rng),
        _random_running(rng, nodes),
        quotas=quotas,
        horizon_s=rng.choice([604_800, 604_800, 2000]),
    )


@pytest.mark.parametrize("seed", range(RANDOM_ROUNDS))
def test_cpsat_against_brute_force_on_a_tiny_round(seed: int) -> None:
    instance = random_round(seed)
    best = brute_force(instance).objective
    options = SolveOptions(time_limit_s=RANDOM_TIME_LIMIT_S, seed=seed % 3)
    decision = solve_round(
        instance, options=options
    )  # valid, never worse than the greedy, bound <= objective
    assert decision.bound <= best + TOLERANCE
    assert lower_bound(instance) <= best + TOLERANCE
    if decision.status.value == "optimal":
        assert decision.objective <= best + TOLERANCE


def test_random_rounds_cover_the_interesting_cases() -> None:
    # The generator is only worth its seeds if they reach every topology and action.
    rounds = [random_round(seed) for seed in range(RANDOM_ROUNDS)]
    topologies = {q.topology for r in rounds for q in r.queue}
    assert topologies == {"nvlink", "node", "rack", "any"}
    assert any(r.running for r in rounds) and any(r.tenants for r in rounds)
    actions = {
        item.action for r in rounds for item in brute_force(r).jobs if item.id.startswith("q")
    }
    assert actions == {Action.START, Action.PLANNED, Action.DEFERRED}


# -- known optima: the round and the model alone both reach them --------------------------


def test_heavier_job_per_second_starts_first_on_the_one_free_node() -> None:
    # FCFS would start the light job (first in the queue); the optimum starts the heavy one.
    instance = round_of(
        [node("a0")],
        [
            job("light", 8, 1000, weight=1.0, submitted_at=-600),
            job("heavy", 8, 1000, weight=3.0, submitted_at=0),
        ],
        aging_per_hour=0.0,  # the objective below prices light's 600 s wait unaged
    )
    for decision in solve(instance):
        assert decision.job("heavy").action is Action.START
        assert decision.job("light").start_s == 1000
        assert decision.objective == pytest.approx(3.0 * 1000 + 1.0 * 2000)


def test_shorter_job_starts_first_when_weights_are_equal() -> None:
    instance = round_of([node("a0")], [job("long", 8, 3000), job("short", 8, 1000)])
    for decision in solve(instance):
        assert decision.job("short").action is Action.START
        assert decision.objective == pytest.approx(1000 + 4000)
    assert brute_force(instance).objective == pytest.approx(1000 + 4000)


def test_leaving_the_fast_type_to_the_job_that_needs_it_beats_the_greedy() -> None:
    # p is quickest on H100 (400 s) but nearly as quick on A100 (600 s); q runs only
    # on H100 (2000 s). The greedy gives p the H100 (400 + 2400 = 2800); the
    # optimum starts p on the A100 and q on the H100 at once (600 + 2000 = 2600).
    instance = round_of(
        [node("a0"), node("h0", gpu_type=H100.name)],
        [
            QueuedJob("p", 8, duration_by_type_s=((A100.name, 600), (H100.name, 400))),
            QueuedJob("q", 8, 4000, gpu_types=(H100.name,)),
        ],
    )
    assert get_policy("wspt").decide(instance).objective == pytest.approx(2800)
    for decision in solve(instance):
        assert decision.objective == pytest.approx(2600)
        assert decision.job("p").action is decision.job("q").action is Action.START
    assert brute_force(instance).objective == pytest.approx(2600)


def test_small_job_fits_before_a_gang_that_waits_for_a_running_job() -> None:
    # r holds a1 until 500, so the 16-GPU gang starts at 500 at the earliest; the
    # 4-GPU job runs on a0 now and ends at 300, before that: 300 + 1500.
    instance = round_of(
        [node("a0", rack="r1"), node("a1", rack="r1")],
        [job("gang", 16, 1000), job("small", 4, 300)],
        [holding("r", "a1", range(8), 500)],
    )
    for decision in solve(instance):
        assert decision.job("small").action is Action.START
        assert decision.job("gang").start_s == 500
        assert decision.objective == pytest.approx(300 + 1500)
    assert brute_force(instance).objective == pytest.approx(300 + 1500)


def test_bound_stays_below_a_valid_decision_that_preempts() -> None:
    # Preempting the best-effort running job (class factor 0.1, 600 s since its last
    # checkpoint, 60 s to restore) and starting q now costs 10 * 100 + 0.1 * (600 + 60);
    # the bound must hold for decisions that preempt.
    instance = round_of(
        [node("a0")],
        [job("q", 8, 100, weight=10.0)],
        [
            holding(
                "r",
                "a0",
                range(8),
                10_000,
                priority_class="best-effort",
                started_at=-5000,
                since_checkpoint_s=600,
                checkpoint_s=60,
            )
        ],
        allow_preemption=True,
    )
    preempting = (
        JobDecision(
            "q", Action.START, gpu_ids=tuple(sorted(gpu_ids("a0", range(8)))), start_s=0, end_s=100
        ),
        JobDecision("r", Action.PREEMPT),
    )
    valid = assemble(instance, "hand", preempting, Status.FEASIBLE, 0.0, time.perf_counter())
    assert check(instance, valid) == []
    assert valid.objective == pytest.approx(1066)
    decision = solve_round(instance)
    assert decision.bound <= valid.objective + TOLERANCE
    assert lower_bound(instance) <= valid.objective + TOLERANCE
