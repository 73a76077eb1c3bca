"""The checker: each rule broken on purpose, named by kind and job; valid decisions pass.

Every case is a tiny instance and a decision that breaks exactly one rule
(its objective recomputed, so only that rule is off), and the test asserts
the set of (kind, job) the checker reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest
from check_builders import decide, deferred, found, planned, start
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.problem_data import (
    FieldError,
    GpuType,
    Instance,
    Node,
    Policy,
    QueuedJob,
    RunningJob,
    Tenant,
)
from whale_opt.registry import get_policy
from whale_opt.testing import instances

TYPES = {
    "A100-80G": GpuType("A100-80G", 80, 1.0),
    "V100-32G": GpuType("V100-32G", 32, 0.5),
}

NODES = (
    Node("a0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1", zone="east"),
    Node("a1", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r1", zone="east"),
    Node("a2", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r2", zone="west"),
    Node("v0", "V100-32G", 8, "hybrid-cube-mesh", cpu=64, memory_gb=512, rack="r2", zone="west"),
    Node("p0", "A100-80G", 4, "pairs", cpu=64, memory_gb=512, rack="r2", zone="west"),
    Node("f0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r2", failed_gpus=(0,)),
    Node("d0", "A100-80G", 8, "nvswitch", cpu=64, memory_gb=512, rack="r2", down=True),
)


def cluster(
    *queue: QueuedJob,
    running: Sequence[RunningJob] = (),
    tenants: Mapping[str, Tenant] | None = None,
    policy: Policy | None = None,
) -> Instance:
    return Instance(
        "check",
        TYPES,
        NODES,
        running=tuple(running),
        queue=queue,
        tenants=dict(tenants or {}),
        policy=policy or Policy(),
    )


def job(job_id: str, gpus: int = 1, duration_s: int = 100, **fields: object) -> QueuedJob:
    return QueuedJob(job_id, gpus, duration_s, **fields)  # type: ignore[arg-type]


def gpus(node: str, *indices: int) -> tuple[str, ...]:
    return tuple(f"{node}/{i}" for i in indices)


# -- GPUs used twice ---------------------------------------------------------------


def test_gpu_used_by_two_started_jobs() -> None:
    inst = cluster(job("q1"), job("q2"))
    decision = decide(inst, start("q1", ["a0/0"]), start("q2", ["a0/0"]))
    assert found(check(inst, decision)) == {("gpu-twice", "q2")}


def test_gpu_used_by_a_started_job_and_a_running_job() -> None:
    inst = cluster(job("q1"), running=[RunningJob("r1", gpus("a0", 0, 1), 50)])
    decision = decide(inst, start("q1", ["a0/1"]))
    violations = check(inst, decision)
    assert found(violations) == {("gpu-twice", "q1")}
    assert "r1" in violations[0].message


def test_gpu_listed_twice_by_one_job() -> None:
    inst = cluster(job("q1", 2))
    decision = decide(inst, start("q1", ["a0/3", "a0/3"]))
    assert found(check(inst, decision)) == {("gpu-twice", "q1")}


def test_gpu_of_a_preempted_job_may_be_reused() -> None:
    inst = cluster(
        job("q1"),
        running=[RunningJob("r1", gpus("a0", 0), 500, priority_class="best-effort")],
        policy=Policy(allow_preemption=True),
    )
    decision = decide(inst, start("q1", ["a0/0"]), JobDecision("r1", Action.PREEMPT))
    assert check(inst, decision) == []


# -- GPU type and memory -----------------------------------------------------------


def test_wrong_gpu_type() -> None:
    inst = cluster(job("q1", gpu_types=("A100-80G",)))
    decision = decide(inst, start("q1", ["v0/0"], end=200))
    assert found(check(inst, decision)) == {("gpu-type", "q1")}


def test_mixed_gpu_types() -> None:
    inst = cluster(job("q1", 2, topology="any"))
    decision = decide(inst, start("q1", ["a2/0", "v0/0"]))
    assert found(check(inst, decision)) == {("gpu-type", "q1")}


def test_too_little_gpu_memory() -> None:
    inst = cluster(job("q1", min_gpu_memory_gb=40))
    decision = decide(inst, start("q1", ["v0/0"], end=200))
    assert found(check(inst, decision)) == {("gpu-memory", "q1")}


def test_type_without_a_known_duration_is_not_allowed() -> None:
    q1 = QueuedJob("q1", 1, duration_by_type_s=(("V100-32G", 70),))
    inst = cluster(q1)
    decision = decide(inst, start("q1", ["a0/0"], end=70))
    assert found(check(inst, decision)) == {("gpu-type", "q1")}


# -- NVLink, gangs and topology -----------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "end"),
    [
        (["v0/0", "v0/5"], 200),  # cube-mesh: 0 links 1, 2, 3 and 4, not 5
        (["v0/0", "v0/1", "v0/6", "v0/7"], 200),  # two halves of two quads
        (["p0/1", "p0/2"], 100),  # pairs: 0-1 and 2-3 only
    ],
)
def test_gpus_not_nvlink_connected(ids: list[str], end: int) -> None:
    inst = cluster(job("q1", len(ids)))
    decision = decide(inst, start("q1", ids, end=end))
    assert found(check(inst, decision)) == {("nvlink", "q1")}


def test_planned_nvlink_job_on_a_node_without_such_a_block() -> None:
    inst = cluster(job("q1", 4))
    decision = decide(inst, planned("q1", 10, 110, ["p0"], [4]))
    assert found(check(inst, decision)) == {("nvlink", "q1")}


def test_a_planned_nvlink_job_may_start_when_a_cpu_only_job_on_its_node_ends() -> None:
    # p0's GPUs are linked in pairs only: a planned NVLink job there starts no earlier
    # than the first end of a job on p0, and a CPU-only job is a job there (the
    # planner counts its end; the checker counted GPU jobs only).
    running = [
        RunningJob("c", (), 50, node="p0", cpu=4),
        RunningJob("r", ("p0/0",), 300),
    ]
    inst = cluster(job("q1", 2), running=running)
    assert check(inst, decide(inst, planned("q1", 50, 150, ["p0"], [2]))) == []
    assert found(check(inst, decide(inst, planned("q1", 10, 110, ["p0"], [2])))) == {
        ("nvlink", "q1")
    }


def test_split_gang_gets_fewer_gpus_than_asked() -> None:
    inst = cluster(job("q1", 4))
    decision = decide(inst, start("q1", gpus("a0", 0, 1, 2)))
    assert found(check(inst, decision)) == {("gang", "q1")}


def test_planned_gang_counts_that_do_not_add_up() -> None:
    inst = cluster(job("q1", 4, topology="any"))
    decision = decide(inst, planned("q1", 10, 110, ["a0", "a1"], [2, 1]))
    assert found(check(inst, decision)) == {("gang", "q1")}


def test_nvlink_job_that_fits_one_node_split_over_two() -> None:
    inst = cluster(job("q1", 4))
    decision = decide(inst, start("q1", gpus("a0", 0, 1) + gpus("a1", 0, 1)))
    violations = check(inst, decision)
    assert found(violations) == {("topology", "q1")}
    assert any("split" in v.message for v in violations)


def test_multi_node_nvlink_job_on_part_of_a_node() -> None:
    inst = cluster(job("q1", 12))
    decision = decide(inst, start("q1", gpus("a0", *range(8)) + gpus("a1", 0, 1, 2, 3)))
    violations = check(inst, decision)
    assert found(violations) == {("topology", "q1")}
    assert any("a1" in v.message for v in violations)


def test_planned_multi_node_nvlink_job_on_part_of_a_node() -> None:
    inst = cluster(job("q1", 12))
    decision = decide(inst, planned("q1", 10, 110, ["a0", "a1"], [8, 4]))
    assert found(check(inst, decision)) == {("topology", "q1")}


def test_multi_node_nvlink_job_on_a_node_without_full_nvlink() -> None:
    # a2 (8, NVSwitch) and p0 (4, bridged pairs) share rack r2: p0 is whole but not connected.
    inst = cluster(job("q1", 12))
    decision = decide(inst, start("q1", gpus("a2", *range(8)) + gpus("p0", 0, 1, 2, 3)))
    violations = check(inst, decision)
    assert found(violations) == {("topology", "q1")}
    assert any("p0" in v.message for v in violations)


def test_multi_node_nvlink_job_over_nodes_of_two_sizes() -> None:
    # a2 (8 GPUs) and q4 (4 GPUs), both NVSwitch, in one rack: gangs take nodes of one size.
    inst = Instance(
        "check",
        TYPES,
        (*NODES, Node("q4", "A100-80G", 4, "nvswitch", cpu=64, memory_gb=512, rack="r2")),
        queue=(job("q1", 12),),
    )
    decision = decide(inst, start("q1", gpus("a2", *range(8)) + gpus("q4", 0, 1, 2, 3)))
    violations = check(inst, decision)
    assert found(violations) == {("topology", "q1")}
    assert any("sizes" in v.message for v in violations)


def test_multi_node_nvlink_job_across_racks() -> None:
    inst = cluster(job("q1", 16))
    decision = decide(inst, start("q1", gpus("a0", *range(8)) + gpus("a2", *range(8))))
    violations = check(inst, decision)
    assert found(violations) == {("topology", "q1")}
    assert any("racks" in v.message for v in violations)


def test_node_job_on_two_nodes() -> None:
    inst = cluster(job("q1", 2, topology="node"))
    decision = decide(inst, start("q1", ["a0/0", "a1/0"]))
    assert found(check(inst, decision)) == {("topology", "q1")}


def test_planned_node_job_on_two_nodes() -> None:
    inst = cluster(job("q1", 2, topology="node"))
    decision = decide(inst, planned("q1", 5, 105, ["a0", "a1"], [1, 1]))
    assert found(check(inst, decision)) == {("topology", "q1")}


def test_rack_job_across_racks() -> None:
    inst = cluster(job("q1", 2, topology="rack"))
    decision = decide(inst, start("q1", ["a0/0", "a2/0"]))
    assert found(check(inst, decision)) == {("topology", "q1")}


# -- CPU, host memory, GPU counts over time ------------------------------------------


def test_cpu_over_a_node() -> None:
    inst = cluster(job("q1", cpu=65))
    decision = decide(inst, start("q1", ["a0/0"]))
    assert found(check(inst, decision)) == {("capacity", "q1")}


def test_cpu_over_a_node_together_with_a_running_job() -> None:
    inst = cluster(job("q1", cpu=30), running=[RunningJob("r1", gpus("a0", 0), 500, cpu=40)])
    decision = decide(inst, start("q1", ["a0/1"]))
    assert found(check(inst, decision)) == {("capacity", "q1")}


def test_host_memory_over_a_node() -> None:
    inst = cluster(job("q1", memory_gb=600))
    decision = decide(inst, start("q1", ["a0/0"]))
    violations = check(inst, decision)
    assert found(violations) == {("capacity", "q1")}
    assert "memory" in violations[0].message


def test_cpu_of_a_multi_node_job_is_spread_by_gpu_share() -> None:
    # 96 CPU over 6 + 2 GPUs: 72 on a0 (> 64), 24 on a1.
    inst = cluster(job("q1", 8, cpu=96, topology="any"))
    decision = decide(inst, start("q1", gpus("a0", *range(6)) + gpus("a1", 0, 1)))
    violations = check(inst, decision)
    assert found(violations) == {("capacity", "q1")}
    assert "a0" in violations[0].message


def test_planned_jobs_overlapping_beyond_a_nodes_gpus() -> None:
    inst = cluster(job("q1", 8), job("q2", 4))
    decision = decide(
        inst, planned("q1", 10, 110, ["a0"], [8]), planned("q2", 50, 150, ["a0"], [4])
    )
    # The job that started last into the overload is named.
    assert found(check(inst, decision)) == {("capacity", "q2")}


def test_planned_job_overlapping_a_started_job() -> None:
    inst = cluster(job("q1", 6), job("q2", 4))
    decision = decide(inst, start("q1", gpus("a0", *range(6))), planned("q2", 50, 150, ["a0"]))
    assert found(check(inst, decision)) == {("capacity", "q2")}


def test_planned_job_overlapping_a_running_job() -> None:
    inst = cluster(job("q1", 4), running=[RunningJob("r1", gpus("a0", *range(6)), 100)])
    decision = decide(inst, planned("q1", 50, 150, ["a0"]))
    assert found(check(inst, decision)) == {("capacity", "q1")}


def test_planned_jobs_back_to_back_share_a_node() -> None:
    inst = cluster(job("q1", 8), job("q2", 8), running=[RunningJob("r1", gpus("a0", 0), 10)])
    decision = decide(
        inst, planned("q1", 10, 110, ["a0"], [8]), planned("q2", 110, 210, ["a0"], [8])
    )
    assert check(inst, decision) == []


# -- quotas --------------------------------------------------------------------------


def test_quota_exceeded_now() -> None:
    inst = cluster(
        job("q1", 4, tenant="nlp"),
        running=[RunningJob("r1", gpus("a0", 0, 1), 500, tenant="nlp")],
        tenants={"nlp": Tenant("nlp", 4)},
    )
    decision = decide(inst, start("q1", gpus("a1", 0, 1, 2, 3)))
    violations = check(inst, decision)
    assert found(violations) == {("quota", "q1")}
    assert "nlp" in violations[0].message


def test_quota_exceeded_later_by_a_planned_job() -> None:
    inst = cluster(
        job("q1", 4, tenant="nlp"),
        job("q2", 2, tenant="nlp"),
        tenants={"nlp": Tenant("nlp", 4)},
    )
    decision = decide(
        inst, start("q1", gpus("a1", 0, 1, 2, 3)), planned("q2", 50, 150, ["a2"], [2])
    )
    violations = check(inst, decision)
    assert found(violations) == {("quota", "q2")}
    assert "t=50" in violations[0].message


def test_quota_respected_when_the_planned_job_waits() -> None:
    inst = cluster(
        job("q1", 4, tenant="nlp"),
        job("q2", 2, tenant="nlp"),
        tenants={"nlp": Tenant("nlp", 4)},
    )
    decision = decide(
        inst, start("q1", gpus("a1", 0, 1, 2, 3)), planned("q2", 100, 200, ["a2"], [2])
    )
    assert check(inst, decision) == []


def test_tenant_over_quota_through_running_jobs_may_keep_them() -> None:
    inst = cluster(
        job("q1", tenant="cv"),
        running=[RunningJob("r1", gpus("a0", 0, 1, 2), 500, tenant="nlp")],
        tenants={"nlp": Tenant("nlp", 1)},
    )
    assert check(inst, decide(inst, start("q1", ["a1/0"]))) == []


def test_quota_counts_shares_that_end_without_float_residue() -> None:
    # Tenant cv runs 18.1 GPUs (shares 0.7, 0.1 and 0.3 among them): 9.1 end at t=1,
    # 8 at t=2,034, 1 at t=6,963. A whole GPU planned at t=6,963 is exactly at the
    # quota of 1 (summed as floats, the level there came out 1.0000000000000018).
    running = [
        RunningJob("w0", gpus("a0", *range(8)), 1, tenant="cv"),
        RunningJob("w1", gpus("a1", *range(8)), 2034, tenant="cv"),
        RunningJob("w2", ("a2/0",), 6963, tenant="cv"),
        RunningJob("s0", ("v0/0",), 1, tenant="cv", gpu_milli=700),
        RunningJob("s1", ("v0/0",), 1, tenant="cv", gpu_milli=100),
        RunningJob("s2", ("v0/1",), 1, tenant="cv", gpu_milli=300),
    ]
    inst = cluster(job("q1", tenant="cv"), running=running, tenants={"cv": Tenant("cv", 1)})
    assert check(inst, decide(inst, planned("q1", 6963, 7063, ["a2"], [1]))) == []
    too_soon = decide(inst, planned("q1", 2034, 2134, ["a2"], [1]))
    assert found(check(inst, too_soon)) == {("quota", "q1")}


def test_quota_violation_names_the_job_that_breaks_it() -> None:
    inst = cluster(job("q1", 4, tenant="nlp"), tenants={"nlp": Tenant("nlp", 2)})
    decision = decide(inst, start("q1", gpus("a1", 0, 1, 2, 3)))
    assert found(check(inst, decision)) == {("quota", "q1")}


# -- failed hardware ----------------------------------------------------------------


def test_started_on_a_failed_gpu() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, start("q1", ["f0/0"]))
    assert found(check(inst, decision)) == {("failed-hardware", "q1")}


def test_started_on_a_down_node() -> None:
    inst = cluster(job("q1"))
    kinds = found(check(inst, decide(inst, start("q1", ["d0/3"]))))
    # A down node has no GPU at all, so its capacity is exceeded as well.
    assert ("failed-hardware", "q1") in kinds
    assert {who for _, who in kinds} == {"q1"}


def test_planned_on_a_down_node() -> None:
    inst = cluster(job("q1"))
    kinds = found(check(inst, decide(inst, planned("q1", 10, 110, ["d0"], [1]))))
    assert ("failed-hardware", "q1") in kinds
    assert {who for _, who in kinds} == {"q1"}


def test_planned_beyond_a_nodes_healthy_gpus() -> None:
    inst = cluster(job("q1", 8, topology="node"))
    kinds = found(check(inst, decide(inst, planned("q1", 10, 110, ["f0"], [8]))))
    assert ("failed-hardware", "q1") in kinds
    assert {who for _, who in kinds} == {"q1"}


# -- coverage of jobs ----------------------------------------------------------------


def test_queued_job_missing() -> None:
    inst = cluster(job("q1"), job("q2"))
    assert found(check(inst, decide(inst, deferred("q2")))) == {("missing", "q1")}


def test_running_job_missing() -> None:
    inst = cluster(job("q1"), running=[RunningJob("r1", gpus("a0", 0), 50)])
    decision = decide(inst, deferred("q1"), keep_running=False)
    assert found(check(inst, decision)) == {("missing", "r1")}


def test_job_duplicated() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, start("q1", ["a0/0"]), start("q1", ["a0/0"]))
    assert found(check(inst, decision)) == {("duplicate", "q1")}


def test_unknown_job() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, deferred("q1"), deferred("zz"))
    assert found(check(inst, decision)) == {("unknown-job", "zz")}


@pytest.mark.parametrize(
    ("item", "culprit"),
    [
        (JobDecision("q1", Action.KEEP), "q1"),
        (JobDecision("r1", Action.DEFERRED), "r1"),
    ],
)
def test_action_that_does_not_fit_the_job(item: JobDecision, culprit: str) -> None:
    inst = cluster(job("q1"), running=[RunningJob("r1", gpus("a0", 0), 50)])
    others = [deferred("q1")] if culprit == "r1" else []
    decision = decide(inst, item, *others)
    assert found(check(inst, decision)) == {("action", culprit)}


@pytest.mark.parametrize("bad", ["zz/0", "a0/8", "a0", "a0/x"])
def test_unknown_gpu_id(bad: str) -> None:
    inst = cluster(job("q1"))
    assert found(check(inst, decide(inst, start("q1", [bad])))) == {("gpu-id", "q1")}


@pytest.mark.parametrize(("nodes", "counts"), [(["zz"], [1]), ([], []), (["a0", "a0"], [1, 1])])
def test_planned_on_unknown_missing_or_repeated_nodes(nodes: list[str], counts: list[int]) -> None:
    inst = cluster(job("q1", sum(counts) or 1, topology="any"))
    decision = decide(inst, planned("q1", 10, 110, nodes, counts))
    assert found(check(inst, decision)) == {("planned-nodes", "q1")}


# -- times, objective, bound ---------------------------------------------------------


def test_planned_start_at_zero() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, planned("q1", 0, 100, ["a0"], [1]))
    assert found(check(inst, decision)) == {("start-time", "q1")}


def test_planned_start_beyond_the_horizon() -> None:
    inst = cluster(job("q1"), policy=Policy(horizon_s=1000))
    decision = decide(inst, planned("q1", 1001, 1101, ["a0"], [1]))
    assert found(check(inst, decision)) == {("start-time", "q1")}


def test_planned_start_at_the_horizon_is_allowed() -> None:
    inst = cluster(job("q1"), policy=Policy(horizon_s=1000))
    assert check(inst, decide(inst, planned("q1", 1000, 1100, ["a0"], [1]))) == []


def test_started_job_not_at_zero() -> None:
    inst = cluster(job("q1"))
    item = JobDecision("q1", Action.START, gpu_ids=("a0/0",), start_s=5, end_s=100)
    assert found(check(inst, decide(inst, item))) == {("start-time", "q1")}


@pytest.mark.parametrize(
    ("queued", "item"),
    [
        (job("q1"), start("q1", ["a0/0"], end=99)),
        (job("q1"), start("q1", ["v0/0"], end=100)),  # V100 runs at half speed: 200
        (job("q1"), planned("q1", 10, 100, ["a0"], [1])),
        (
            QueuedJob("q1", 1, 100, duration_by_type_s=(("V100-32G", 150),)),
            start("q1", ["v0/0"], end=200),  # measured duration wins: 150
        ),
    ],
)
def test_wrong_end_time(queued: QueuedJob, item: JobDecision) -> None:
    inst = cluster(queued)
    assert found(check(inst, decide(inst, item))) == {("end-time", "q1")}


def test_objective_that_does_not_match() -> None:
    inst = cluster(job("q1", weight=2.0))
    right = decide(inst, start("q1", ["a0/0"]))
    assert right.objective == 200
    wrong = right.with_changes(objective=199.0)
    assert found(check(inst, wrong)) == {("objective", None)}


def test_bound_above_objective() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, start("q1", ["a0/0"]), bound=101.0)
    assert found(check(inst, decision)) == {("bound", None)}


def test_horizon_not_echoed() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, start("q1", ["a0/0"])).with_changes(horizon_s=5)
    assert found(check(inst, decision)) == {("horizon", None)}


def test_decision_for_another_instance() -> None:
    inst = cluster(job("q1"))
    decision = decide(inst, start("q1", ["a0/0"])).with_changes(instance="other")
    assert found(check(inst, decision)) == {("instance", None)}


# -- preemption ---------------------------------------------------------------------


def test_preemption_when_the_policy_forbids_it() -> None:
    inst = cluster(running=[RunningJob("r1", gpus("a0", 0), 50)])
    decision = decide(inst, JobDecision("r1", Action.PREEMPT))
    assert found(check(inst, decision)) == {("preemption", "r1")}


def test_preemption_of_a_non_preemptible_job() -> None:
    inst = cluster(
        running=[RunningJob("r1", gpus("a0", 0), 50, preemptible=False)],
        policy=Policy(allow_preemption=True),
    )
    decision = decide(inst, JobDecision("r1", Action.PREEMPT))
    assert found(check(inst, decision)) == {("preemption", "r1")}


def test_preemption_is_priced_in_the_objective() -> None:
    # Best-effort (class factor 0.1), weight 2, 100 s run without a checkpoint, 10 s restore.
    victim = RunningJob(
        "r1",
        gpus("a0", 0),
        50,
        weight=2.0,
        checkpoint_s=10,
        started_at=-100,
        priority_class="best-effort",
    )
    inst = cluster(job("q1"), running=[victim], policy=Policy(allow_preemption=True))
    decision = decide(inst, start("q1", ["a0/0"]), JobDecision("r1", Action.PREEMPT))
    assert decision.objective == pytest.approx(100 + 2.0 * 0.1 * (100 + 10))
    assert check(inst, decision) == []
    assert found(check(inst, decision.with_changes(objective=0.0))) == {("objective", None)}


# -- valid decisions with every feature ----------------------------------------------


def test_valid_decision_with_every_feature_passes() -> None:
    inst = cluster(
        # NVLink 4-GPU job on one cube-mesh quad (V100 at half speed).
        job("q1", 4, gpu_types=("V100-32G",), cpu=16, memory_gb=64),
        # 16-GPU NVLink gang on two whole NVSwitch nodes of rack r1.
        job("q2", 16, 1000, tenant="nlp", cpu=64, memory_gb=512),
        # 'any' job over two racks, outside its preferred zone (priced).
        job("q3", 2, topology="any", zone="east"),
        # 'rack' job planned over two nodes of rack r1 once the gang ends.
        job("q4", 10, 50, topology="rack", tenant="nlp"),
        # 'node' job planned on the node with a failed GPU (7 healthy).
        job("q5", 7, 60, topology="node"),
        # Measured duration on V100 only; on a bridged pair of v0.
        QueuedJob("q6", 2, duration_by_type_s=(("V100-32G", 70),)),
        # Unservable: deferred.
        job("q7", 1, min_gpu_memory_gb=100),
        running=[
            RunningJob("r1", gpus("v0", 0, 4), 300, tenant="cv"),
            RunningJob(
                "r2", gpus("a2", 0, 1, 2, 3), 900, tenant="nlp", priority_class="best-effort"
            ),
            RunningJob("r3", gpus("f0", 1, 2), 40, tenant="cv"),
        ],
        tenants={"nlp": Tenant("nlp", 20), "cv": Tenant("cv", 32), "rl": Tenant("rl")},
        policy=Policy(allow_preemption=True, horizon_s=10_000),
    )
    decision = decide(
        inst,
        start("q1", gpus("v0", 1, 5, 6, 7), end=200),  # 1-5 cross link joins the quads
        start("q2", gpus("a0", *range(8)) + gpus("a1", *range(8)), end=1000),
        start("q3", ["a2/0", "p0/0"]),  # on a GPU of the preempted r2
        planned("q4", 1000, 1050, ["a0", "a1"], [8, 2]),
        planned("q5", 40, 100, ["f0"], [7]),
        start("q6", ["v0/2", "v0/3"], end=70),
        deferred("q7"),
        JobDecision("r2", Action.PREEMPT),
    )
    assert check(inst, decision) == []
    assert [name for name, _ in decision.job("q3").dropped] == ["zone"]
    silent = decision.with_changes(jobs=tuple(replace(item, dropped=()) for item in decision.jobs))
    assert found(check(inst, silent)) == {("preferences", "q3")}


# -- regressions: checker bugs found by these tests -------------------------------------


def test_running_overload_does_not_blame_a_later_job() -> None:
    # Instance validation allows running jobs whose CPU exceeds the node's.
    inst = cluster(job("q1", cpu=1), running=[RunningJob("r1", gpus("a0", 0), 100, cpu=80)])
    assert check(inst, decide(inst, planned("q1", 200, 300, ["a0"], [1]))) == []
    # Joining the overload while it lasts is still a violation.
    later = decide(inst, planned("q1", 50, 150, ["a0"], [1]))
    assert found(check(inst, later)) == {("capacity", "q1")}


@pytest.mark.parametrize(
    "item",
    [
        start("q1", ["zz/0"]),
        planned("q1", 10, 110, ["zz"], [1]),
    ],
)
def test_unknown_node_for_a_job_with_a_zone_is_reported_not_raised(item: JobDecision) -> None:
    inst = cluster(job("q1", zone="east"))
    jobs = (item,)
    decision = Decision(inst.name, "test", Status.FEASIBLE, 100.0, 0.0, inst.policy.horizon_s, jobs)
    assert found(check(inst, decision)) & {("gpu-id", "q1"), ("planned-nodes", "q1")}


def test_started_without_gpus_is_reported_not_raised() -> None:
    inst = cluster(job("q1", 2))
    decision = decide(inst, start("q1", []))
    assert ("gang", "q1") in found(check(inst, decision))


@pytest.mark.parametrize("counts", [[5, -1], [4, 0]])
def test_planned_node_gpus_below_one_are_reported(counts: list[int]) -> None:
    inst = cluster(job("q1", 4, topology="any"))
    decision = decide(inst, planned("q1", 10, 110, ["a0", "a1"], counts))
    assert found(check(inst, decision)) == {("gang", "q1")}


# -- the checker on mutated greedy decisions -------------------------------------------


def _recomputed(instance: Instance, decision: Decision, jobs: list[JobDecision]) -> Decision:
    return decision.with_changes(jobs=tuple(jobs), objective=objective(instance, jobs))


@settings(max_examples=40, deadline=None)
@given(instances(min_queue=1), st.data())
def test_checker_catches_mutations_of_a_valid_decision(
    instance: Instance, data: st.DataObject
) -> None:
    decision = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []
    jobs = list(decision.jobs)
    k = data.draw(st.integers(0, len(jobs) - 1), label="job")
    item = jobs[k]
    mutation = data.draw(st.sampled_from(["drop", "twice", "objective", "end", "horizon", "steal"]))
    # GPUs held whole (a share may lawfully join another share on its GPU)
    held = [gpu for running in instance.running if not running.shares for gpu in running.gpu_ids]
    if mutation == "steal" and item.action is Action.START and held:
        expected = ("gpu-twice", item.id)
        stolen = data.draw(st.sampled_from(held))
        jobs[k] = replace(item, gpu_ids=(stolen, *item.gpu_ids[1:]))
    elif mutation == "drop":
        expected = ("missing", item.id)
        del jobs[k]
    elif mutation == "twice":
        expected = ("duplicate", item.id)
        jobs.append(item)
    elif mutation == "end" and item.end_s is not None:
        expected = ("end-time", item.id)
        jobs[k] = replace(item, end_s=item.end_s + data.draw(st.sampled_from([1, -1])))
    elif mutation == "horizon":
        bad = decision.with_changes(horizon_s=instance.policy.horizon_s + 1)
        assert ("horizon", None) in found(check(instance, bad))
        return
    else:
        # The checker allows a relative 1e-6 of float noise.
        bad = decision.with_changes(objective=decision.objective * 1.001 + 1)
        assert ("objective", None) in found(check(instance, bad))
        return
    assert expected in found(check(instance, _recomputed(instance, decision, jobs)))


@settings(max_examples=40, deadline=None)
@given(instances(min_queue=1), st.data())
def test_checker_judges_any_gpu_choice_without_raising(
    instance: Instance, data: st.DataObject
) -> None:
    # Started jobs on arbitrary existing GPUs (failed, busy, wrong type, scattered):
    # the checker must name what is wrong, never raise.
    everything = [node.gpu_id(i) for node in instance.nodes for i in range(node.gpu_count)]
    jobs: list[JobDecision] = []
    for queued in instance.queue:
        count = data.draw(st.integers(1, min(queued.gpu_count + 1, len(everything))))
        ids = data.draw(st.lists(st.sampled_from(everything), min_size=count, max_size=count))
        end = data.draw(st.integers(1, 10_000))
        jobs.append(JobDecision(queued.id, Action.START, gpu_ids=tuple(ids), start_s=0, end_s=end))
    jobs += [JobDecision(r.id, Action.KEEP) for r in instance.running]
    decision = Decision(
        instance.name,
        "fuzz",
        Status.FEASIBLE,
        objective(instance, jobs),
        0.0,
        instance.policy.horizon_s,
        tuple(jobs),
    )
    for violation in check(instance, decision):
        assert violation.kind and violation.message


# -- a policy's own records: plain strings and lists, checked like the enums ---------


def test_a_decision_of_plain_strings_and_lists_is_checked_like_one_of_enums() -> None:
    # A policy that writes job.action == "start" builds its records with "start";
    # the checker compares actions by identity, and once passed such a decision
    # (a GPU twice, on a node that does not exist, a preemption not allowed) as valid.
    instance = cluster(
        QueuedJob("q", 2, duration_s=100),
        running=(RunningJob("r", ("a0/0",), 100),),
    )

    def build(action: type[str] | type[Action], sequence: type[list[str]] | type[tuple[str, ...]]):
        jobs = [
            JobDecision("r", action("preempt")),
            JobDecision("q", action("start"), sequence(["zz/9", "zz/9", "a0/0"]), 0, 100),
        ]
        status = Status.FEASIBLE if action is Action else "feasible"
        return Decision(
            "check", "mine", status, objective(instance, jobs), 0, 86_400, sequence(jobs)
        )

    with_enums = check(instance, build(Action, tuple))
    assert {v.kind for v in with_enums} >= {"gpu-id", "preemption"}
    assert check(instance, build(str, list)) == with_enums


def test_an_action_no_decision_knows_is_refused_by_name() -> None:
    with pytest.raises(FieldError, match=r"action: must be one of start, .* \(got 'begin'\)"):
        JobDecision("q", "begin")  # type: ignore[arg-type]
    with pytest.raises(FieldError, match=r"status: must be one of optimal"):
        Decision("c", "mine", "done", 0.0, 0.0, 1, ())  # type: ignore[arg-type]
