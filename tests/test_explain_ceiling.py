"""Explain names the wait ceiling: a job past it runs next, and when; who went ahead."""

from __future__ import annotations

import json

from whale_opt.decision import Action
from whale_opt.explain import REASON_KINDS, Explanation, Reason, explain
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob

HOUR = 3600


def _round(*queue: QueuedJob, policy: Policy | None = None) -> Instance:
    """One 8-GPU node, held until 1,000 s by a running job."""
    return Instance(
        name="ceiling",
        gpu_types={"A": GpuType("A", 80)},
        nodes=(Node("a0", "A", 8, "nvswitch"),),
        running=(RunningJob("r", tuple(f"a0/{i}" for i in range(8)), 1_000),),
        queue=queue,
        policy=Policy() if policy is None else policy,
    )


def _one(instance: Instance, job_id: str) -> Explanation:
    (found,) = explain(instance, [job_id], with_counterfactuals=False)
    return found


def _reason(found: Explanation, kind: str) -> Reason:
    assert kind in REASON_KINDS
    return next(r for r in found.reasons if r.kind == kind)


OLD = QueuedJob("old", 8, 7_200, submitted_at=-26 * HOUR)
ONLINE = QueuedJob("online", 8, 600, priority_class="online")


def test_an_overdue_job_is_told_it_runs_next_and_when() -> None:
    found = _one(_round(ONLINE, OLD), "old")
    assert found.action is Action.PLANNED and found.start_s == 1_000
    ceiling = found.reasons[0]
    assert ceiling.kind == "ceiling"
    assert "waited 26 h > max_wait_s 24 h" in ceiling.message
    assert "runs next" in ceiling.message
    assert "expected start 1000 s (in 17 min)" in ceiling.message
    assert ceiling.facts == {
        "waited_s": 26 * HOUR,
        "max_wait_s": 24 * HOUR,
        "overdue": True,
        "overdue_by_s": 2 * HOUR,
        "ahead": [],
        "expected_start_s": 1_000,
    }
    # Why it is not running yet: the running job holds the node until then.
    assert _reason(found, "busy").facts["until_s"] == 1_000


def test_a_later_overdue_job_is_told_who_goes_before_it() -> None:
    later = QueuedJob("later", 8, 600, submitted_at=-25 * HOUR)
    found = _one(_round(ONLINE, OLD, later), "later")
    ceiling = found.reasons[0]
    assert ceiling.kind == "ceiling"
    assert ceiling.facts["ahead"] == ["old"]
    assert "runs after 1 job(s)" in ceiling.message
    assert [r.kind for r in found.reasons].count("ceiling") == 1
    assert found.start_s == 1_000 + 7_200 == ceiling.facts["expected_start_s"]


def test_the_best_effort_ceiling_is_named_with_its_class() -> None:
    late = QueuedJob("be", 8, 600, priority_class="best-effort", submitted_at=-80 * HOUR)
    ceiling = _one(_round(ONLINE, late), "be").reasons[0]
    assert "waited 80 h > max_wait_s 72 h (class best-effort)" in ceiling.message


def test_a_job_an_overdue_one_went_ahead_of_is_told_so() -> None:
    found = _one(_round(ONLINE, OLD), "online")
    ceiling = _reason(found, "ceiling")
    assert ceiling.facts["overdue"] is False
    assert [r["job"] for r in ceiling.facts["by"]] == ["old"]
    assert "old (waited 26 h > 24 h)" in ceiling.message
    assert "its own ceiling, 24 h, is 24 h away" in ceiling.message
    # The overdue job went first for its wait, not its rank: not "outranked".
    assert all(r.kind != "outranked" for r in found.reasons)


def test_an_overdue_job_planned_at_the_same_start_is_named() -> None:
    # r frees a0/0 and a1/0 at 70 s; the overdue "pair" is planned then on a0, whole.
    # j could start now on a0/1 + a1/1, but would hold a0/1 into pair's run: it goes at
    # 70 s too, on a1, and was told no reason at all.
    inst = Instance(
        name="same-start",
        gpu_types={"A": GpuType("A", 80)},
        nodes=(Node("a0", "A", 2, rack="r0"), Node("a1", "A", 2, rack="r0")),
        running=(RunningJob("r", ("a0/0", "a1/0"), 70),),
        queue=(
            QueuedJob("pair", 2, 100, topology="node", submitted_at=-26 * HOUR),
            QueuedJob("j", 2, 100, topology="any", weight=10),
        ),
    )
    found = _one(inst, "j")
    assert found.start_s == 70
    assert [r["job"] for r in _reason(found, "ceiling").facts["by"]] == ["pair"]


def test_no_ceiling_reason_without_overdue_jobs() -> None:
    fresh = QueuedJob("fresh", 8, 600, submitted_at=-HOUR)
    for instance in (
        _round(ONLINE, fresh),
        _round(ONLINE, OLD, policy=Policy(max_wait_s=None)),
    ):
        for found in explain(instance, with_counterfactuals=False):
            assert all(r.kind != "ceiling" for r in found.reasons), found.job_id


def test_the_reason_reaches_json_and_text() -> None:
    found = _one(_round(ONLINE, OLD), "old")
    payload = json.loads(json.dumps(found.to_dict()))
    assert payload["reasons"][0]["kind"] == "ceiling"
    assert payload["reasons"][0]["facts"]["expected_start_s"] == 1_000
    assert "[ceiling] waited 26 h > max_wait_s 24 h" in found.render()
