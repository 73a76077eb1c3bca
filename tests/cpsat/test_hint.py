"""Incremental rounds: the previous round's plan is the next round's hint."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.cpsat.model import hint_order
from whale_opt.decision import Action, objective
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import list_schedule
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import FieldError, GpuType, Instance, Node, QueuedJob
from whale_opt.scheduler import Scheduler
from whale_opt.sim import SimConfig
from whale_opt.solve import solve


def test_hint_order_keeps_queued_hinted_jobs_first_then_the_greedy_order() -> None:
    instance = generate("mixed", gpus=32, queued=6, seed=1)
    ids = [job.id for job in instance.queue]
    greedy = wspt_order(instance)
    hint = (ids[4], "gone", ids[1])
    assert hint_order(instance, hint, greedy) == [
        4,
        1,
        *(k for k in greedy if k not in (4, 1)),
    ]
    assert hint_order(instance, ("gone",), greedy) is None
    assert hint_order(instance, tuple(ids[k] for k in greedy), greedy) is None


def test_cpsat_starts_from_the_better_of_the_greedy_and_the_hint() -> None:
    instance = generate("fragmented", gpus=64, queued=20, seed=3)
    ids = [job.id for job in instance.queue]
    hint = tuple(reversed(ids))  # a plan in another order
    decision = solve(instance, "cpsat", SolveOptions(time_limit_s=5, preset="fast", hint=hint))
    assert check(instance, decision) == []
    hinted = hint_order(instance, hint, wspt_order(instance))
    assert hinted is not None
    planned = list_schedule(instance, hinted, prefer=WsptPolicy.prefer)
    assert decision.stats["hint_value"] >= decision.objective - 1e-6
    assert decision.stats["hint_value"] <= objective(instance, planned) + 1e-6
    assert decision.objective <= decision.stats["greedy_value"] + 1e-6


def test_the_last_applied_plan_is_the_next_rounds_hint() -> None:
    cluster = Instance(
        "two",
        {"A100": GpuType("A100", 80)},
        (Node("a0", "A100", 8, "nvswitch"), Node("a1", "A100", 8, "nvswitch")),
    )
    scheduler = Scheduler(cluster, "cpsat", options=SolveOptions(time_limit_s=2), carry_plan=True)
    for k, duration in enumerate((100, 300, 200, 400)):
        scheduler.submit(QueuedJob(f"j{k}", 8, duration))
    assert scheduler.round_options().hint == ()
    decision = scheduler.decide(0)
    planned = sorted((item.start_s, item.id) for item in decision.by_action(Action.PLANNED))
    assert len(planned) == 2
    assert scheduler.plan == tuple(job_id for _, job_id in planned)
    assert scheduler.round_options().hint == scheduler.plan
    assert scheduler.round_options().time_limit_s == 2


def test_by_default_a_scheduler_does_not_carry_its_plan() -> None:
    cluster = Instance("one", {"A100": GpuType("A100", 80)}, (Node("a0", "A100", 8, "nvswitch"),))
    scheduler = Scheduler(cluster, "cpsat", options=SolveOptions(time_limit_s=2))
    for k in range(3):
        scheduler.submit(QueuedJob(f"j{k}", 8, 100 * (k + 1)))
    scheduler.decide(0)
    assert len(scheduler.plan) == 2
    assert scheduler.round_options().hint == ()


def test_the_replay_switch_is_a_bool() -> None:
    with pytest.raises(FieldError, match="carry_plan"):
        SimConfig(carry_plan="yes")  # type: ignore[arg-type]
