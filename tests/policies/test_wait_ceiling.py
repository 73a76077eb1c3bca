"""The wait ceiling: overdue jobs first across classes, in every policy, and the defaults.

A job that has waited (``-submitted_at``) longer than its class's ceiling
(``PriorityClass.max_wait_s``, else ``Policy.max_wait_s``) is overdue: the
order rule every baseline uses puts it ahead of every job that is not, first
past its ceiling first, and its weight is raised so that CP-SAT's objective
ranks it first too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, Decision, objective
from whale_opt.io import InputError, instance_from_dict
from whale_opt.options import SolveOptions
from whale_opt.policies.ordered import ranked
from whale_opt.policies.wspt import smith_ratio, wspt_order
from whale_opt.problem_data import (
    DEFAULT_AGING_PER_HOUR,
    DEFAULT_BEST_EFFORT_MAX_WAIT_S,
    DEFAULT_MAX_WAIT_S,
    DEFAULT_PRIORITY_CLASSES,
    FROM_POLICY,
    OVERDUE_LIFT,
    FieldError,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
)
from whale_opt.registry import REGISTRY, get_policy
from whale_opt.scheduler import Scheduler
from whale_opt.testing import instances

HOUR = 3600
FAST = SolveOptions(time_limit_s=2.0)
HEURISTICS = sorted(name for name in REGISTRY if name not in ("cpsat", "learned"))


def one_node(*queue: QueuedJob, policy: Policy | None = None, **fields: Any) -> Instance:
    """One 4-GPU A100 node and ``queue`` (default policy unless given)."""
    return Instance(
        name="ceiling",
        gpu_types={"a100": GpuType("a100", 80.0)},
        nodes=(Node("n0", "a100", 4, "nvswitch"),),
        queue=queue,
        policy=Policy() if policy is None else policy,
        **fields,
    )


def started(decision: Decision) -> list[str]:
    return [item.id for item in decision.by_action(Action.START)]


def fresh_online() -> QueuedJob:
    return QueuedJob("fresh-online", 4, 600, priority_class="online", submitted_at=0)


def old_best_effort(waited_h: float) -> QueuedJob:
    """A long best-effort gang (ten hours) that has waited ``waited_h`` hours."""
    return QueuedJob(
        "old-be", 4, 36_000, priority_class="best-effort", submitted_at=-int(waited_h * HOUR)
    )


# -- the order rule ---------------------------------------------------------------


def test_an_overdue_best_effort_job_goes_before_a_fresh_online_one() -> None:
    waiting = one_node(fresh_online(), old_best_effort(73))  # best-effort ceiling: 72 h
    assert waiting.overdue == (False, True)
    assert [waiting.queue[k].id for k in wspt_order(waiting)] == ["old-be", "fresh-online"]
    # One hour less and it is not overdue: class rank decides again.
    early = one_node(fresh_online(), old_best_effort(71))
    assert early.overdue == (False, False)
    assert [early.queue[k].id for k in wspt_order(early)] == ["fresh-online", "old-be"]


def test_waiting_exactly_the_ceiling_is_not_overdue() -> None:
    at = one_node(QueuedJob("j", 1, 60, submitted_at=-DEFAULT_MAX_WAIT_S))
    past = one_node(QueuedJob("j", 1, 60, submitted_at=-DEFAULT_MAX_WAIT_S - 1))
    assert at.overdue == (False,) and at.ceiling_at(0) == 0
    assert past.overdue == (True,) and past.ceiling_at(0) == -1


def test_overdue_jobs_go_first_past_their_ceiling_first() -> None:
    instance = one_node(
        QueuedJob("fresh-heavy", 1, 60, weight=100.0, priority_class="online"),
        QueuedJob("late-25h", 1, 60, submitted_at=-25 * HOUR),
        QueuedJob("late-30h", 4, 90_000, submitted_at=-30 * HOUR),
        # Waited longest, but passed its class's ceiling (72 h) only 30 min ago.
        QueuedJob("be-72.5h", 1, 60, priority_class="best-effort", submitted_at=-72 * HOUR - 1800),
    )
    order = [instance.queue[k].id for k in ranked(instance, lambda k, job: 0)]
    assert order == ["late-30h", "late-25h", "be-72.5h", "fresh-heavy"]
    # Every policy's key applies only after the overdue jobs: SJF would put
    # the 60 s jobs first, WSPT the heavy online one.
    assert [instance.queue[k].id for k in wspt_order(instance)] == order


def test_equal_ceilings_make_overdue_jobs_fifo() -> None:
    instance = one_node(
        QueuedJob("b", 1, 60, submitted_at=-26 * HOUR, priority_class="online"),
        QueuedJob("a", 1, 60, submitted_at=-27 * HOUR, weight=0.5),
        QueuedJob("c", 4, 9_000, submitted_at=-25 * HOUR),
    )
    assert [instance.queue[k].id for k in wspt_order(instance)] == ["a", "b", "c"]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_policy_starts_the_overdue_job_first(name: str) -> None:
    # Both need the whole node: whichever goes first takes it.
    instance = one_node(fresh_online(), QueuedJob("old", 4, 36_000, submitted_at=-25 * HOUR))
    decision = get_policy(name).decide(instance, FAST)
    assert check(instance, decision) == []
    assert started(decision) == ["old"], name
    assert decision.job("fresh-online").start_s == 36_000


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_policy_reserves_for_the_overdue_job(name: str) -> None:
    """An overdue gang waiting for busy GPUs keeps them: nothing backfills past its start."""
    running = (RunningJob("r", ("n0/0", "n0/1"), 1_000),)
    instance = one_node(
        QueuedJob("small", 1, 5_000, priority_class="online"),
        QueuedJob("old", 4, 36_000, submitted_at=-25 * HOUR),
        running=running,
    )
    decision = get_policy(name).decide(instance, FAST)
    assert check(instance, decision) == []
    assert decision.job("old").start_s == 1_000, name
    assert decision.job("small").action is not Action.START


@settings(max_examples=25, deadline=None)
@given(instances(max_nodes=4, max_queue=6), st.data())
def test_generated_rounds_with_overdue_jobs_pass_the_checker(
    instance: Instance, data: st.DataObject
) -> None:
    """Some jobs pushed past their ceilings: overdue first, every heuristic valid."""
    late = data.draw(st.lists(st.booleans(), min_size=len(instance.queue)))
    queue = tuple(
        replace(job, submitted_at=job.submitted_at - 100 * HOUR)
        if k < len(late) and late[k]
        else job
        for k, job in enumerate(instance.queue)
    )
    instance = instance.replace(queue=queue)
    order = wspt_order(instance)
    flags = [instance.overdue[k] for k in order]
    assert flags == sorted(flags, reverse=True)  # every overdue job before every other
    for name in HEURISTICS:
        decision = get_policy(name).decide(instance)
        assert check(instance, decision) == [], name
        assert decision.bound <= decision.objective * (1 + 1e-9) + 1e-6, name


# -- the dominating weight --------------------------------------------------------


def test_overdue_weight_lifts_its_smith_ratio_over_every_other() -> None:
    instance = one_node(
        fresh_online(),
        QueuedJob("training", 2, 1_200),
        old_best_effort(73),
    )
    ratios = [smith_ratio(instance, k) for k in range(3)]
    largest = max(ratios[:2])
    assert ratios[2] == pytest.approx(OVERDUE_LIFT * largest)
    # Not overdue, the same job keeps its aged weight: 1 x 0.1 x (1 + 0.05 x 71).
    early = one_node(fresh_online(), QueuedJob("training", 2, 1_200), old_best_effort(71))
    assert early.weights[2] == pytest.approx(0.1 * (1 + DEFAULT_AGING_PER_HOUR * 71))


def test_the_lift_never_lowers_a_weight_and_needs_a_job_not_overdue() -> None:
    heavy = QueuedJob("heavy", 1, 60, weight=1_000.0, submitted_at=-25 * HOUR)
    light = QueuedJob("light", 4, 36_000, weight=0.01)
    instance = one_node(heavy, light, policy=Policy(aging_per_hour=0.0))
    assert instance.weights == (1_000.0, 0.01)  # already far above 2x light's ratio
    alone = one_node(QueuedJob("late", 4, 36_000, submitted_at=-25 * HOUR))
    assert alone.weights == pytest.approx((1 + DEFAULT_AGING_PER_HOUR * 25,))


def test_cpsat_starts_the_overdue_job_and_the_weights_make_that_cheaper() -> None:
    # Without the ceiling, starting the short online job first is what pays.
    late = QueuedJob("old", 4, 36_000, submitted_at=-25 * HOUR)
    plain = one_node(fresh_online(), late, policy=Policy(max_wait_s=None))
    assert started(get_policy("cpsat").decide(plain, FAST)) == ["fresh-online"]
    ceiling = one_node(fresh_online(), late)
    decision = get_policy("cpsat").decide(ceiling, FAST)
    assert check(ceiling, decision) == []
    assert started(decision) == ["old"]
    # The decision reports the lifted weights: online-first costs more under them.
    online_first = get_policy("wspt").decide(plain)
    assert decision.objective < objective(ceiling, online_first.jobs)


# -- where the ceiling comes from --------------------------------------------------


def test_the_defaults() -> None:
    policy = Policy()
    assert (policy.max_wait_s, policy.aging_per_hour) == (86_400, 0.05)
    assert DEFAULT_MAX_WAIT_S == 86_400 and DEFAULT_BEST_EFFORT_MAX_WAIT_S == 259_200
    classes = DEFAULT_PRIORITY_CLASSES
    assert classes["best-effort"].max_wait_s == 259_200
    assert classes["online"].max_wait_s == classes["training"].max_wait_s == FROM_POLICY


def test_a_class_ceiling_overrides_the_policy() -> None:
    classes = {
        "batch": PriorityClass("batch", rank=1, max_wait_s=2 * HOUR),
        "scavenger": PriorityClass("scavenger", rank=-1, max_wait_s=None),
    }
    instance = one_node(
        QueuedJob("b", 1, 60, priority_class="batch", submitted_at=-3 * HOUR),
        QueuedJob("s", 1, 60, priority_class="scavenger", submitted_at=-1_000 * HOUR),
        QueuedJob("t", 1, 60, submitted_at=-3 * HOUR),
        priority_classes=classes,
        policy=Policy(max_wait_s=4 * HOUR),
    )
    assert [instance.max_wait(job) for job in instance.queue] == [2 * HOUR, None, 4 * HOUR]
    assert instance.overdue == (True, False, False)
    none = instance.replace(policy=Policy(max_wait_s=None))
    assert none.overdue == (True, False, False)  # the class keeps its own
    assert none.max_wait(none.queue[2]) is None


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "24h"])
def test_a_bad_ceiling_names_the_field(bad: object) -> None:
    with pytest.raises(FieldError, match="max_wait_s"):
        Policy(max_wait_s=bad)  # type: ignore[arg-type]
    with pytest.raises(FieldError, match="max_wait_s"):
        PriorityClass("c", max_wait_s=bad)  # type: ignore[arg-type]


def _file(policy: dict[str, Any] | None = None, **top: Any) -> Instance:
    raw: dict[str, Any] = {
        "format": "whale-opt/instance@1",
        "name": "file",
        "gpu_types": {"A": {"memory_gb": 80}},
        "nodes": [{"id": "a0", "gpu_type": "A", "gpus": 4, "nvlink": "nvswitch"}],
        "queue": [
            {"id": "old", "gpus": 4, "duration_s": 36000, "submitted_at": -25 * HOUR},
            {"id": "new", "gpus": 4, "duration_s": 600, "priority_class": "online"},
        ],
        **top,
    }
    if policy is not None:
        raw["policy"] = policy
    return instance_from_dict(json.loads(json.dumps(raw)))


def test_a_silent_file_gets_the_defaults() -> None:
    for silent in (_file(), _file({"horizon_s": 604_800, "seed": 3})):
        assert silent.policy.max_wait_s == DEFAULT_MAX_WAIT_S
        assert silent.policy.aging_per_hour == DEFAULT_AGING_PER_HOUR
        assert silent.overdue == (True, False)
        assert started(get_policy("wspt").decide(silent)) == ["old"]


def test_a_file_that_sets_them_keeps_its_values() -> None:
    off = _file({"max_wait_s": None, "aging_per_hour": 0})
    assert off.policy.max_wait_s is None and off.policy.aging_per_hour == 0
    assert off.overdue == (False, False)
    assert off.weights == (1.0, 10.0)  # what the file meant before the defaults
    assert started(get_policy("wspt").decide(off)) == ["new"]
    longer = _file({"max_wait_s": 48 * HOUR})
    assert longer.overdue == (False, False)


def test_a_file_sets_a_class_ceiling_or_none() -> None:
    classes = {
        "training": {"weight": 1, "rank": 1, "max_wait_s": 20 * HOUR},
        "best-effort": {"weight": 0.1, "rank": 0, "max_wait_s": None},
        "online": {"weight": 10, "rank": 2, "preemptible": False, "max_wait_s": "policy"},
    }
    instance = _file(priority_classes=classes)
    assert instance.priority_classes["training"].max_wait_s == 20 * HOUR
    assert instance.priority_classes["best-effort"].max_wait_s is None
    assert instance.max_wait(instance.queue[1]) == DEFAULT_MAX_WAIT_S
    # A class the file defines without a ceiling takes the policy's.
    plain = _file(priority_classes={"best-effort": {"weight": 0.1, "rank": 0}})
    assert plain.priority_classes["best-effort"].max_wait_s == FROM_POLICY


@pytest.mark.parametrize(
    ("where", "value"),
    [("policy", 0), ("policy", "24h"), ("class", 0), ("class", "inherit")],
)
def test_the_schema_refuses_a_bad_ceiling(where: str, value: object) -> None:
    with pytest.raises(InputError, match="max_wait_s"):
        if where == "policy":
            _file({"max_wait_s": value})
        else:
            _file(priority_classes={"x": {"max_wait_s": value}})


def test_the_round_api_applies_the_defaults() -> None:
    scheduler = Scheduler(one_node(), policy="wspt")  # the cluster's policy: Policy()
    scheduler.submit(QueuedJob("old", 4, 36_000, submitted_at=0))
    scheduler.submit(replace(fresh_online(), submitted_at=25 * HOUR))
    assert started(scheduler.decide(25 * HOUR)) == ["old"]
