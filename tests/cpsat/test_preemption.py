"""Preemption in the CP-SAT round: kept valid through the search, and chosen by the model.

A running job may be preempted only under :mod:`whale_opt.rules` (allowed,
preemptible now, a job started on its GPUs that outranks it or reclaims a
guarantee, at most ``max_preemptions``); the checker judges every decision
here. ``solve_model_from`` solves the model alone with every queued job
freed, from a given decision, so the model itself must find (or keep, or
undo) preemptions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.problem_data import Instance, Tenant
from whale_opt.registry import get_policy

from .builders import holding, job, node, round_of, solve_model_from, solve_round


def _best_effort(job_id: str, indices: list[int], remaining_s: int, lost_s: int) -> object:
    return holding(
        job_id,
        "a0",
        indices,
        remaining_s,
        priority_class="best-effort",
        started_at=-10_000,
        since_checkpoint_s=lost_s,
    )


def _one_victim_round(**policy: object) -> Instance:
    # A best-effort job holds the whole node for 20000 s more; preempting it
    # loses 0.1 x (600 + 60) and lets the training job end at 1000 instead of 21000.
    held = holding(
        "r",
        "a0",
        range(8),
        20_000,
        priority_class="best-effort",
        started_at=-5000,
        since_checkpoint_s=600,
        checkpoint_s=60,
    )
    policy.setdefault("allow_preemption", True)
    return round_of([node("a0")], [job("q", 8, 1000)], [held], **policy)


def test_round_keeps_the_greedys_preemption_valid_and_never_does_worse() -> None:
    instance = _one_victim_round()
    greedy = get_policy("wspt").decide(instance)
    assert greedy.job("r").action is Action.PREEMPT  # the greedy's own preemption
    decision = solve_round(instance)
    assert decision.job("r").action is Action.PREEMPT
    assert set(decision.job("q").gpu_ids) == {f"a0/{i}" for i in range(8)}
    assert decision.objective == pytest.approx(1000 + 0.1 * 660)
    # The model alone, from the greedy's decision: the victim is decided again.
    model, result = solve_model_from(instance, list(greedy.jobs))
    assert model.job("r").action is Action.PREEMPT
    assert result.proved and result.value == pytest.approx(1066)


def test_model_preempts_on_its_own_from_a_schedule_that_waits() -> None:
    instance = _one_victim_round()
    waits = list_schedule(instance, [0])
    assert next(item for item in waits if item.id == "q").start_s == 20_000
    decision, result = solve_model_from(instance, waits)
    assert decision.job("r").action is Action.PREEMPT
    assert decision.job("q").action is Action.START
    assert result.proved and decision.objective == pytest.approx(1066)


def test_model_keeps_a_running_job_whose_preemption_costs_more_than_waiting() -> None:
    # Lost work 250,000 s x 0.1 = 25,000 > the 20,000 s the job would wait.
    instance = _one_victim_round()
    held = replace(instance.running[0], started_at=-300_000, since_checkpoint_s=250_000)
    instance = instance.replace(running=(held,))
    decision, _ = solve_model_from(instance, list(get_policy("wspt").decide(instance).jobs))
    assert decision.job("r").action is Action.KEEP
    assert decision.job("q").start_s == 20_000


@pytest.mark.parametrize(
    ("policy", "why"),
    [
        ({"allow_preemption": False}, "preemption off"),
        ({"min_run_s": 6000}, "has run 5000 s only"),
        ({"max_preemptions": 0}, "no preemption this round"),
    ],
)
def test_rules_that_forbid_the_preemption_are_honoured(policy: dict[str, object], why: str) -> None:
    instance = _one_victim_round(**policy)
    for decision in (
        solve_round(instance),
        solve_model_from(instance, list_schedule(instance, [0]))[0],
    ):
        assert decision.job("r").action is Action.KEEP, why


def test_an_unpreemptible_class_is_never_preempted() -> None:
    held = holding("r", "a0", range(8), 20_000, priority_class="online", started_at=-5000)
    instance = round_of(
        [node("a0")], [job("q", 8, 1000, priority_class="online")], [held], allow_preemption=True
    )
    decision, _ = solve_model_from(instance, list_schedule(instance, [0]))
    assert decision.job("r").action is Action.KEEP


def test_the_cap_forbids_preempting_the_two_jobs_a_whole_node_job_needs() -> None:
    instance = round_of(
        [node("a0", 4)],
        [job("q", 4, 1000)],
        [_best_effort("r1", [0, 1], 9000, 60), _best_effort("r2", [2, 3], 9000, 60)],
        allow_preemption=True,
        max_preemptions=1,
    )
    for decision in (
        solve_round(instance),
        solve_model_from(instance, list_schedule(instance, [0]))[0],
    ):
        assert [item.id for item in decision.jobs if item.action is Action.PREEMPT] == []
    uncapped = instance.replace(policy=replace(instance.policy, max_preemptions=2))
    decision, _ = solve_model_from(uncapped, list_schedule(uncapped, [0]))
    assert {item.id for item in decision.jobs if item.action is Action.PREEMPT} == {"r1", "r2"}


def test_a_tenant_below_its_guarantee_reclaims_gpus_another_tenant_borrowed() -> None:
    # Same class: only the guarantee justifies it. cv is guaranteed 8 and holds
    # none; nlp has no guarantee, so everything it holds is borrowed.
    held = holding("r", "a0", range(8), 20_000, tenant="nlp", started_at=-5000, checkpoint_s=60)
    instance = round_of(
        [node("a0")], [job("q", 8, 1000, tenant="cv")], [held], allow_preemption=True
    )
    instance = instance.replace(tenants={"cv": Tenant("cv", None, 8)})
    decision, _ = solve_model_from(instance, list_schedule(instance, [0]))
    assert decision.job("r").action is Action.PREEMPT
    assert decision.job("q").action is Action.START


# -- brute force over decisions on a tiny round ---------------------------------------------


def _brute_round() -> Instance:
    # r1 (cost 0.1 x 3600 = 360, ends 6000) and r2 (cost 0.1 x 100 = 10, ends 30000)
    # each hold a pair of a 4-GPU node; q1 (training) may displace them, q2
    # (best-effort) may not. Best: preempt r2, q1 now on its pair, q2 after q1.
    return round_of(
        [node("a0", 4)],
        [job("q1", 2, 1000), job("q2", 2, 500, priority_class="best-effort")],
        [_best_effort("r1", [0, 1], 6000, 3600), _best_effort("r2", [2, 3], 30_000, 100)],
        allow_preemption=True,
    )


def _choices(instance: Instance, k: int, times: list[int]) -> Iterator[JobDecision]:
    item = instance.queue[k]
    duration = item.duration_s or 0
    for gpus in itertools.combinations(range(4), item.gpu_count):
        yield JobDecision(
            item.id, Action.START, gpu_ids=tuple(f"a0/{i}" for i in gpus), start_s=0, end_s=duration
        )
    for t in times:
        yield JobDecision(
            item.id,
            Action.PLANNED,
            start_s=t,
            end_s=t + duration,
            nodes=("a0",),
            node_gpus=(item.gpu_count,),
        )
    yield JobDecision(item.id, Action.DEFERRED, reason="brute force")


def brute_force(instance: Instance) -> Decision:
    """The cheapest valid decision over every preemption set and, per job, every GPU
    set now, every left-shifted start later (at 1 s or when something ends) and
    deferral."""
    durations = [item.duration_s or 0 for item in instance.queue]
    times = {0, 1, *(held.remaining_s for held in instance.running)}
    for _ in range(len(instance.queue)):
        times |= {t + d for t in times for d in durations}
    times.discard(0)  # a start at 0 is a start now, on named GPUs
    best: Decision | None = None
    for preempted in itertools.product([False, True], repeat=len(instance.running)):
        running = [
            JobDecision(held.id, Action.PREEMPT if cut else Action.KEEP)
            for held, cut in zip(instance.running, preempted, strict=True)
        ]
        per_job = [list(_choices(instance, k, sorted(times))) for k in range(len(instance.queue))]
        for combo in itertools.product(*per_job):
            decision = assemble(instance, "brute", [*combo, *running], Status.FEASIBLE, 0.0, 0.0)
            if (best is None or decision.objective < best.objective) and check(
                instance, decision
            ) == []:
                best = decision
    assert best is not None
    return best


def test_cpsat_preempts_the_cheap_best_effort_job_as_brute_force_over_decisions_does() -> None:
    instance = _brute_round()
    best = brute_force(instance)
    assert best.objective == pytest.approx(1000 + 10 + 0.1 * 1500)
    assert best.job("r2").action is Action.PREEMPT
    decision, result = solve_model_from(instance, list_schedule(instance, [0, 1]))
    assert result.proved
    assert decision.objective == pytest.approx(best.objective)
    assert decision.job("r2").action is Action.PREEMPT
    assert decision.job("r1").action is Action.KEEP
    assert solve_round(instance).objective == pytest.approx(best.objective)
