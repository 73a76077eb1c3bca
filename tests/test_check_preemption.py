"""The checker's preemption rules (whale_opt.rules.preemption_problems), one broken at a time.

Each case preempts running job ``r1`` (four GPUs of ``a0``) so that queued ``q1``
can start on them, with the objective recomputed, and changes one fact: the
policy, the victim's flags or class, how long it has run, how many others are
preempted, who starts on its GPUs, and the tenants' guaranteed shares. The test
asserts the exact (kind, job) set the checker reports and the reason it gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from check_builders import decide, found, preempt, start

from whale_opt.check import Violation, check
from whale_opt.decision import Action, Decision, JobDecision
from whale_opt.problem_data import (
    DEFAULT_PRIORITY_CLASSES,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)

TYPES = {"A100-80G": GpuType("A100-80G", 80, 1.0)}
NODES = (
    Node("a0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1"),
    Node("a1", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1"),
)
CLASSES = {
    **DEFAULT_PRIORITY_CLASSES,
    "urgent": PriorityClass("urgent", weight=5.0, rank=3, preemptible=False),
    "batch": PriorityClass("batch", weight=0.5, rank=0, preemptible=True),
    "pinned": PriorityClass("pinned", weight=1.0, rank=0, preemptible=False),
}
VICTIM_GPUS = ("a0/0", "a0/1", "a0/2", "a0/3")


def round_of(
    queue: Sequence[QueuedJob],
    running: Sequence[RunningJob],
    *,
    tenants: Mapping[str, Tenant] | None = None,
    **policy: Any,
) -> Instance:
    return Instance(
        "preemption",
        TYPES,
        NODES,
        running=tuple(running),
        queue=tuple(queue),
        tenants=dict(tenants or {}),
        policy=Policy(**{"allow_preemption": True, **policy}),
        priority_classes=CLASSES,
    )


def victim(job_id: str = "r1", gpus: Sequence[str] = VICTIM_GPUS, **fields: Any) -> RunningJob:
    """A best-effort running job (outranked by the default class) that has run an hour."""
    spec: dict[str, Any] = {"priority_class": "best-effort", "started_at": -3600, **fields}
    return RunningJob(job_id, tuple(gpus), 5000, **spec)


def queued(job_id: str = "q1", gpus: int = 4, **fields: Any) -> QueuedJob:
    return QueuedJob(job_id, gpus, 100, **fields)


def only_preemption_of(violations: list[Violation], job_id: str, reason: str) -> None:
    """Exactly one rule is broken: a preemption of ``job_id``, for ``reason``."""
    assert found(violations) == {("preemption", job_id)}, violations
    assert any(reason in v.message for v in violations), violations


def test_preemption_for_a_higher_rank_passes() -> None:
    inst = round_of([queued()], [victim()])
    assert check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt())) == []


# -- the policy and the victim -------------------------------------------------------


def test_preemption_when_the_policy_forbids_it() -> None:
    inst = round_of([queued(priority_class="online")], [victim()], allow_preemption=False)
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "policy.allow_preemption is off")


def test_victim_that_is_not_preemptible() -> None:
    inst = round_of([queued()], [victim(preemptible=False)])
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "is not preemptible")


def test_victim_whose_class_is_not_preemptible() -> None:
    # Outranked (urgent 3 > pinned 0) and preemptible itself, but its class is not.
    inst = round_of([queued(priority_class="urgent")], [victim(priority_class="pinned")])
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "priority class pinned is not preemptible")


def test_victim_of_the_default_online_class_is_not_preemptible() -> None:
    inst = round_of([queued(priority_class="urgent")], [victim(priority_class="online")])
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "priority class online is not preemptible")


def test_victim_that_has_not_run_min_run_s() -> None:
    inst = round_of([queued()], [victim(started_at=-599)], min_run_s=600)
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "has run 599 s, less than min_run_s 600")


def test_victim_that_has_run_exactly_min_run_s_may_go() -> None:
    inst = round_of([queued()], [victim(started_at=-600)], min_run_s=600)
    assert check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt())) == []


# -- how many ---------------------------------------------------------------------------


def two_victims(cap: int | None) -> tuple[Instance, Decision]:
    """Two victims on a0, one 8-GPU job starting on all of it."""
    inst = round_of(
        [queued(gpus=8)],
        [victim("r1"), victim("r2", ("a0/4", "a0/5", "a0/6", "a0/7"))],
        max_preemptions=cap,
    )
    everything = [f"a0/{i}" for i in range(8)]
    return inst, decide(inst, start("q1", everything), preempt("r1"), preempt("r2"))


def test_preemptions_over_max_preemptions_name_the_first_one_too_many() -> None:
    inst, decision = two_victims(1)
    violations = check(inst, decision)
    only_preemption_of(violations, "r2", "2 preemptions exceed max_preemptions 1")


def test_preemptions_at_max_preemptions_pass() -> None:
    inst, decision = two_victims(2)
    assert check(inst, decision) == []


def test_max_preemptions_zero_forbids_any() -> None:
    inst = round_of([queued()], [victim()], max_preemptions=0)
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "1 preemptions exceed max_preemptions 0")


# -- who benefits ------------------------------------------------------------------------


def test_preemption_with_nothing_started_on_its_gpus() -> None:
    inst = round_of([queued()], [victim()])
    elsewhere = start("q1", ["a1/0", "a1/1", "a1/2", "a1/3"])
    violations = check(inst, decide(inst, elsewhere, preempt()))
    only_preemption_of(violations, "r1", "no job started on its GPUs outranks it")


def test_preemption_for_a_job_only_planned_on_its_node() -> None:
    inst = round_of([queued()], [victim()])
    later = JobDecision("q1", Action.PLANNED, start_s=10, end_s=110, nodes=("a0",), node_gpus=(4,))
    violations = check(inst, decide(inst, later, preempt()))
    only_preemption_of(violations, "r1", "no job started on its GPUs")


def test_preemption_for_a_job_that_starts_on_only_one_of_its_gpus_passes() -> None:
    inst = round_of([queued(gpus=1)], [victim()])
    assert check(inst, decide(inst, start("q1", ["a0/3"]), preempt())) == []


@pytest.mark.parametrize(
    ("job_class", "victim_class"),
    [
        ("training", "training"),  # same rank
        ("best-effort", "training"),  # lower rank
        ("batch", "best-effort"),  # a custom class of the same rank 0
    ],
)
def test_preemption_for_a_job_that_does_not_outrank_the_victim(
    job_class: str, victim_class: str
) -> None:
    inst = round_of(
        [queued(priority_class=job_class, tenant="cv")],
        [victim(priority_class=victim_class, tenant="nlp")],
    )
    violations = check(inst, decide(inst, start("q1", VICTIM_GPUS), preempt()))
    only_preemption_of(violations, "r1", "outranks it or reclaims a guarantee")


# -- guaranteed shares -----------------------------------------------------------------


def reclaim(tenants: Mapping[str, Tenant], *, job_tenant: str = "cv") -> tuple[Instance, Decision]:
    """Same rank: q1 of ``job_tenant`` starts on the GPUs of r1 (nlp, 4 GPUs held); cv
    also holds 2 GPUs on a1 through r2, which is kept."""
    inst = round_of(
        [queued(tenant=job_tenant, priority_class="training")],
        [
            victim(tenant="nlp", priority_class="training"),
            victim("r2", ("a1/0", "a1/1"), tenant="cv", priority_class="training"),
        ],
        tenants=tenants,
    )
    return inst, decide(inst, start("q1", VICTIM_GPUS), preempt())


def test_guarantee_reclaim_from_a_tenant_above_its_own_passes() -> None:
    # cv holds 2 < its 6 guaranteed (6 after); nlp holds 4 > its 0 guaranteed: all borrowed.
    inst, decision = reclaim({"cv": Tenant("cv", 8, 6), "nlp": Tenant("nlp", 8, 0)})
    assert check(inst, decision) == []


def test_guarantee_reclaim_from_a_tenant_without_a_guarantee_passes() -> None:
    # No guarantee: everything nlp holds is borrowed.
    inst, decision = reclaim({"cv": Tenant("cv", None, 6)})
    assert check(inst, decision) == []


@pytest.mark.parametrize(
    ("tenants", "job_tenant"),
    [
        # nlp holds 4 = its guarantee: nothing borrowed to reclaim.
        ({"cv": Tenant("cv", 8, 6), "nlp": Tenant("nlp", 8, 4)}, "cv"),
        # cv holds 2 = its guarantee: not below it.
        ({"cv": Tenant("cv", 8, 2), "nlp": Tenant("nlp", 8, 0)}, "cv"),
        # cv has no guarantee at all.
        ({"cv": Tenant("cv", 8), "nlp": Tenant("nlp", 8, 0)}, "cv"),
        # nlp reclaiming from itself is no reclaim.
        ({"nlp": Tenant("nlp", 16, 8)}, "nlp"),
    ],
    ids=["victim-tenant-at-guarantee", "job-tenant-at-guarantee", "no-guarantee", "same-tenant"],
)
def test_same_rank_preemption_without_a_guarantee_to_reclaim(
    tenants: Mapping[str, Tenant], job_tenant: str
) -> None:
    inst, decision = reclaim(tenants, job_tenant=job_tenant)
    only_preemption_of(check(inst, decision), "r1", "reclaims a guarantee from its tenant")


# -- the price --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("since_checkpoint_s", "lost"),
    [(300, 300), (None, 3600)],  # unknown: all work since it started is lost
)
def test_preemption_price_uses_effective_weight_and_work_since_checkpoint(
    since_checkpoint_s: int | None, lost: int
) -> None:
    inst = round_of(
        [queued(priority_class="urgent")],  # effective weight 5
        [
            victim(
                weight=2.0,
                priority_class="batch",  # class factor 0.5
                since_checkpoint_s=since_checkpoint_s,
                checkpoint_s=60,
            )
        ],
    )
    decision = decide(inst, start("q1", VICTIM_GPUS), preempt())
    assert decision.objective == pytest.approx(5.0 * 100 + 2.0 * 0.5 * (lost + 60))
    assert check(inst, decision) == []
    wrong = decision.with_changes(objective=5.0 * 100 + 2.0 * (lost + 60))
    assert found(check(inst, wrong)) == {("objective", None)}
