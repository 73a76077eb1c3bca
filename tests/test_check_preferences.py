"""The checker on draining nodes, soft preferences and the objective's effective weights.

Draining nodes take no new work (started or planned) yet keep what runs there;
every soft preference a placement drops is reported in ``dropped`` and nothing
else is; the objective is recomputed with effective weights (the job's weight x
its class's factor x aging) and the preference prices, by hand here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from check_builders import decide, found, planned, start

from whale_opt.check import check
from whale_opt.decision import Action, JobDecision
from whale_opt.problem_data import (
    DEFAULT_PRIORITY_CLASSES,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
)

TYPES = {
    "A100-80G": GpuType("A100-80G", 80, 1.0),
    "V100-32G": GpuType("V100-32G", 32, 0.5),
}
NODES = (
    Node("a0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1", zone="east"),
    Node("a1", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1", zone="east"),
    Node("p0", "A100-80G", 4, "pcie", cpu=64, memory_gb=512, rack="r2", zone="west"),
    Node("v0", "V100-32G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r2", zone="west"),
    Node("d0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1", draining=True),
)
CLASSES = {**DEFAULT_PRIORITY_CLASSES, "urgent": PriorityClass("urgent", 4.0, 3, False)}


def round_of(*queue: QueuedJob, running: Sequence[RunningJob] = (), **policy: Any) -> Instance:
    return Instance(
        "prefs",
        TYPES,
        NODES,
        running=tuple(running),
        queue=queue,
        policy=Policy(**policy),
        priority_classes=CLASSES,
    )


def job(job_id: str = "q1", gpus: int = 1, **fields: Any) -> QueuedJob:
    return QueuedJob(job_id, gpus, 100, **fields)


# -- draining nodes -------------------------------------------------------------------


def test_job_started_on_a_draining_node() -> None:
    inst = round_of(job())
    violations = check(inst, decide(inst, start("q1", ["d0/0"])))
    assert found(violations) == {("draining", "q1")}
    assert violations[0].message == "node d0 is draining"


def test_job_planned_on_a_draining_node() -> None:
    inst = round_of(job())
    violations = check(inst, decide(inst, planned("q1", 10, 110, ["d0"], [1])))
    assert found(violations) == {("draining", "q1")}


def test_gang_with_one_node_draining_is_named_once() -> None:
    inst = round_of(job(gpus=16))
    ids = [f"a0/{i}" for i in range(8)] + [f"d0/{i}" for i in range(8)]
    violations = check(inst, decide(inst, start("q1", ids)))
    assert [(v.kind, v.job, v.message) for v in violations] == [
        ("draining", "q1", "node d0 is draining")
    ]


# node_gpus is optional in decision@1: a planned job without it is split evenly over
# its nodes, for draining, preferences and their prices as for capacity.


def test_job_planned_on_a_draining_node_without_node_gpus() -> None:
    inst = round_of(job())
    assert found(check(inst, decide(inst, planned("q1", 10, 110, ["d0"])))) == {("draining", "q1")}


def test_planned_job_without_node_gpus_pays_for_its_zone() -> None:
    inst = round_of(job(zone="east"), zone_penalty_s=1000)
    decision = decide(inst, planned("q1", 10, 110, ["p0"]))
    assert decision.objective == 110 + 1000


def test_running_job_on_a_draining_node_is_kept_and_others_start_elsewhere() -> None:
    inst = round_of(job(), running=[RunningJob("r1", ("d0/0", "d0/1"), 500)])
    assert check(inst, decide(inst, start("q1", ["a0/0"]))) == []


# -- dropped preferences: reported, and only those ---------------------------------------


DROPS = [
    # (the job, where it goes, the preference it drops)
    (job(zone="east"), start("q1", ["p0/0"]), "zone"),
    (job(zone="east"), planned("q1", 10, 110, ["p0"], [1]), "zone"),
    (job(preferred_gpu_types=("A100-80G",)), start("q1", ["v0/0"], end=200), "gpu_type"),
    (job(gpus=2, topology="any", prefer_nvlink=True), start("q1", ["p0/0", "p0/1"]), "nvlink"),
    (  # split over two nodes while one would hold it
        job(gpus=2, topology="any", prefer_nvlink=True),
        start("q1", ["a0/0", "a1/0"]),
        "nvlink",
    ),
    (  # planned: a PCIe node has no NVLink-connected block at all
        job(gpus=2, topology="node", prefer_nvlink=True),
        planned("q1", 10, 110, ["p0"], [2]),
        "nvlink",
    ),
]


@pytest.mark.parametrize(("queued", "item", "name"), DROPS)
def test_dropped_preference_reported_passes(
    queued: QueuedJob, item: JobDecision, name: str
) -> None:
    inst = round_of(queued)
    decision = decide(inst, item)
    assert [dropped for dropped, _ in decision.job("q1").dropped] == [name]
    assert check(inst, decision) == []


@pytest.mark.parametrize(("queued", "item", "name"), DROPS)
def test_dropped_preference_not_reported(queued: QueuedJob, item: JobDecision, name: str) -> None:
    inst = round_of(queued)
    violations = check(inst, decide(inst, item, report=False))
    assert found(violations) == {("preferences", "q1")}
    assert violations[0].message == f"drops ['{name}'] but reports none"


@pytest.mark.parametrize(
    ("queued", "item"),
    [
        (job(zone="east"), start("q1", ["a0/0"])),
        (job(preferred_gpu_types=("V100-32G",)), start("q1", ["v0/0"], end=200)),
        (job(gpus=2, topology="any", prefer_nvlink=True), start("q1", ["a0/0", "a0/5"])),
        (job(), start("q1", ["p0/0"])),  # no preference at all
    ],
)
def test_preference_reported_but_not_dropped(queued: QueuedJob, item: JobDecision) -> None:
    inst = round_of(queued)
    claimed = replace(item, dropped=(("zone", "made up"),))
    violations = check(inst, decide(inst, claimed, report=False))
    assert found(violations) == {("preferences", "q1")}
    assert violations[0].message == "drops none but reports ['zone']"


def test_preference_reported_under_the_wrong_name() -> None:
    inst = round_of(job(zone="east", preferred_gpu_types=("A100-80G",)))
    wrong = replace(start("q1", ["p0/0"]), dropped=(("gpu_type", "made up"),))
    violations = check(inst, decide(inst, wrong, report=False))
    assert found(violations) == {("preferences", "q1")}
    assert violations[0].message == "drops ['zone'] but reports ['gpu_type']"


def test_required_nvlink_is_no_soft_preference() -> None:
    # prefer_nvlink on an nvlink job adds nothing: the requirement already holds.
    inst = round_of(job(gpus=2, prefer_nvlink=True))
    decision = decide(inst, start("q1", ["a0/0", "a0/1"]))
    assert decision.job("q1").dropped == ()
    assert check(inst, decision) == []


def test_deferred_job_reporting_a_dropped_preference() -> None:
    inst = round_of(job(zone="east"))
    claim = JobDecision("q1", Action.DEFERRED, reason="test", dropped=(("zone", "made up"),))
    assert found(check(inst, decide(inst, claim, report=False))) == {("preferences", "q1")}


# -- the objective: effective weights and preference prices --------------------------------


def test_objective_uses_class_factor_aging_and_every_preference_price() -> None:
    inst = round_of(
        # urgent (x4), waited 2 h at 0.5/h (x2): effective weight 1.5 x 4 x 2 = 12.
        job(
            "q1",
            2,
            topology="any",
            weight=1.5,
            priority_class="urgent",
            submitted_at=-7200,
            zone="east",
            preferred_gpu_types=("V100-32G",),
            prefer_nvlink=True,
        ),
        # best-effort (x0.1), waited 1 h (x1.5): 0.15, deferred to horizon + 100.
        job("q2", priority_class="best-effort", submitted_at=-3600),
        # training (x1), not yet waiting: 1, on v0 at half speed.
        job("q3", preferred_gpu_types=("V100-32G",)),
        aging_per_hour=0.5,
        horizon_s=10_000,
        zone_penalty_s=1000,
        gpu_type_penalty_s=300,
        nvlink_penalty_s=70,
    )
    assert inst.weights == pytest.approx((12.0, 0.15, 1.0))
    decision = decide(
        inst,
        start("q1", ["p0/0", "p0/1"]),  # west, A100, PCIe: drops all three
        JobDecision("q2", Action.DEFERRED, reason="test"),
        start("q3", ["v0/0"], end=200),
    )
    assert [name for name, _ in decision.job("q1").dropped] == ["zone", "gpu_type", "nvlink"]
    expected = 12.0 * (100 + 1000 + 300 + 70) + 0.15 * (10_000 + 100) + 1.0 * 200
    assert decision.objective == pytest.approx(expected)
    assert check(inst, decision) == []
    raw_weights = 1.5 * (100 + 1000 + 300 + 70) + 1.0 * (10_000 + 100) + 1.0 * 200
    for wrong in (raw_weights, expected - 12.0 * 70, expected + 1):
        assert found(check(inst, decision.with_changes(objective=wrong))) == {("objective", None)}


def test_aging_counts_only_time_already_waited() -> None:
    inst = round_of(job("q1", submitted_at=0), job("q2", submitted_at=-1800), aging_per_hour=2.0)
    assert inst.weights == pytest.approx((1.0, 2.0))
