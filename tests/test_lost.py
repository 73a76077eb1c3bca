"""Lost jobs: running when their hardware failed, read as such, reported ``lost``
by every decision, judged by the checker and requeued by the round API."""

from __future__ import annotations

from pathlib import Path

import pytest
from check_builders import decide, found, start

from whale_opt.budget import solve_head
from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision
from whale_opt.io import (
    InputError,
    instance_from_dict,
    instance_to_dict,
    read_decision,
    read_instance,
)
from whale_opt.options import SolveOptions
from whale_opt.problem_data import (
    FieldError,
    GpuType,
    Instance,
    Node,
    QueuedJob,
    RunningJob,
    hardware_failure,
)
from whale_opt.registry import get_policy
from whale_opt.scheduler import Scheduler
from whale_opt.solve import solve

DATA = Path(__file__).resolve().parent / "data"
LOST_FILE = DATA / "good-lost-jobs.json"
REASONS = {"r-down": "node a02 is down", "r-gpu": "GPU a01/5 failed"}


def _tight() -> Instance:
    """Four GPUs, one failed: a lost job held it and a healthy one, a kept job holds
    another; a 2-GPU job fits only if it takes the lost job's healthy GPU."""
    return Instance(
        name="tight",
        gpu_types={"A100": GpuType("A100", 80)},
        nodes=(Node("a0", "A100", 4, "pcie", cpu=32, memory_gb=256, failed_gpus=(3,)),),
        running=(RunningJob("r-ok", ("a0/0",), 500),),
        lost=(RunningJob("r-gpu", ("a0/1", "a0/3"), 500),),
        queue=(QueuedJob("q", 2, 100, topology="any"),),
    )


def _lost_items(decision: Decision) -> dict[str, str | None]:
    return {item.id: item.reason for item in decision.by_action(Action.LOST)}


# -- reading and writing --------------------------------------------------------------


def test_the_reader_splits_running_jobs_on_failed_hardware_into_lost() -> None:
    instance = read_instance(LOST_FILE)
    assert [job.id for job in instance.running] == ["r-ok"]
    assert [job.id for job in instance.lost] == ["r-down", "r-gpu"]
    assert {job.id: instance.lost_reason(job) for job in instance.lost} == REASONS
    assert instance.lost_reason(instance.running[0]) is None
    # Their GPUs are nobody's: the healthy one of r-gpu is free for new work.
    assert set(instance.gpu_owner) == {"a01/0", "a01/1"}
    assert set(instance.running_index) == {"r-ok"}


def test_instance_round_trip_keeps_lost_jobs_in_the_running_list() -> None:
    instance = read_instance(LOST_FILE)
    raw = instance_to_dict(instance)
    assert [job["id"] for job in raw["running"]] == ["r-ok", "r-down", "r-gpu"]
    assert instance_from_dict(raw) == instance
    assert instance_from_dict(instance_to_dict(_tight())) == _tight()


def test_reader_errors_name_the_job_by_its_place_in_the_files_running_list() -> None:
    raw = instance_to_dict(read_instance(LOST_FILE))
    raw["running"] = [  # lost, healthy, then a bad GPU id in the file's third place
        raw["running"][1],
        raw["running"][0],
        {"id": "r-bad", "gpus": ["a01/9"], "remaining_s": 60},
    ]
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "f.json")
    assert caught.value.path == "running[2].gpus[0]"
    assert "index out of range" in caught.value.message
    raw["running"][2] = {"id": "r-ok", "gpus": ["a02/7"], "remaining_s": 60}  # lost, same id
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "f.json")
    assert (caught.value.path, "duplicate job id" in caught.value.message) == (
        "running[2].id",
        True,
    )


def test_hardware_failure_names_every_failure_once_and_skips_unknown_ids() -> None:
    nodes = {n.id: n for n in read_instance(LOST_FILE).nodes}
    ids = ["a02/0", "a02/1", "a01/5", "a01/0", "zz/1", "nonsense"]
    assert hardware_failure(nodes, ids) == "node a02 is down; GPU a01/5 failed"
    assert hardware_failure(nodes, ["a01/0", "zz/1"]) is None


# -- validation -----------------------------------------------------------------------


def test_a_job_on_healthy_hardware_cannot_be_lost() -> None:
    with pytest.raises(FieldError) as caught:
        _tight().replace(lost=(RunningJob("x", ("a0/2",), 10),))
    assert caught.value.path == "lost[0].gpus"
    assert "all on healthy hardware" in caught.value.message


def test_a_running_job_on_failed_hardware_belongs_in_lost() -> None:
    with pytest.raises(FieldError) as caught:
        _tight().replace(running=(RunningJob("x", ("a0/3",), 10),))
    assert caught.value.path == "running[0].gpus[0]"
    assert "lost" in caught.value.message


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"lost": (RunningJob("r-ok", ("a0/3",), 10),)}, "lost[0].id", "duplicate job id"),
        ({"queue": (QueuedJob("r-gpu", 1, 10),)}, "queue[0].id", "duplicate job id"),
        ({"lost": (RunningJob("x", ("a0/0", "a0/3"), 10),)}, "lost[0].gpus[0]", "held by r-ok"),
        ({"lost": (RunningJob("x", ("a0/3", "b0/0"), 10),)}, "lost[0].gpus[1]", "unknown node"),
        (
            {"lost": (RunningJob("x", ("a0/3",), 10, priority_class="gold"),)},
            "lost[0].priority_class",
            "is not a priority class",
        ),
    ],
)
def test_lost_jobs_are_cross_checked_like_running_ones(
    changes: dict[str, object], path: str, message: str
) -> None:
    with pytest.raises(FieldError) as caught:
        _tight().replace(**changes)
    assert caught.value.path == path
    assert message in caught.value.message


# -- every solver reports them --------------------------------------------------------


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_every_solver_reports_each_lost_job_and_uses_its_healthy_gpus(solver: str) -> None:
    instance = _tight()
    decision = solve(instance, solver, time_limit_s=1)
    assert check(instance, decision) == []
    assert _lost_items(decision) == {"r-gpu": "GPU a0/3 failed"}
    assert set(decision.job("q").gpu_ids) == {"a0/1", "a0/2"}  # a0/1 was the lost job's
    assert decision.job("r-ok").action is Action.KEEP
    assert [item.id for item in decision.jobs].count("r-gpu") == 1
    # A lost job costs nothing: the objective is the queued job's end alone.
    assert decision.objective == pytest.approx(100 * instance.weights[0])


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_the_lost_jobs_file_solves_clean(solver: str) -> None:
    instance = read_instance(LOST_FILE)
    decision = solve(instance, solver, time_limit_s=1)
    assert check(instance, decision) == []
    assert _lost_items(decision) == REASONS
    assert decision.job("q1").action is Action.START


def test_a_split_round_and_a_cut_queue_report_each_lost_job_once() -> None:
    instance = read_instance(LOST_FILE)
    split = solve(instance, "wspt", split_above_gpus=8)  # pools of the two nodes
    assert check(instance, split) == []
    assert _lost_items(split) == REASONS
    wspt = get_policy("wspt")
    head = solve_head(instance, 0, wspt.decide, "wspt")  # q1 cut: the head is empty
    assert check(instance, head) == []
    assert [item.id for item in head.jobs].count("r-down") == 1
    assert _lost_items(head) == REASONS
    assert head.job("q1").action is Action.DEFERRED


# -- the checker ----------------------------------------------------------------------


def test_the_hand_written_decision_is_valid() -> None:
    instance = read_instance(LOST_FILE)
    decision = read_decision(DATA / "good-decision-lost-jobs.json")
    assert check(instance, decision) == []


def _with(instance: Instance, *items: JobDecision) -> Decision:
    lost = [JobDecision(j.id, Action.LOST, reason="hardware") for j in instance.lost]
    listed = {item.id for item in items}
    return decide(instance, *items, *(item for item in lost if item.id not in listed))


@pytest.mark.parametrize("action", [Action.KEEP, Action.PREEMPT, Action.DEFERRED])
def test_a_lost_job_must_be_reported_lost(action: Action) -> None:
    instance = _tight()
    decision = _with(instance, start("q", ["a0/1", "a0/2"]), JobDecision("r-gpu", action))
    assert found(check(instance, decision)) == {("lost", "r-gpu")}
    assert "must be 'lost'" in str(check(instance, decision)[0])


def test_only_a_lost_job_may_be_lost() -> None:
    instance = _tight()
    decision = _with(
        instance,
        JobDecision("q", Action.LOST, reason="x"),
        JobDecision("r-ok", Action.LOST, reason="x"),
    )
    assert found(check(instance, decision)) == {("action", "q"), ("action", "r-ok")}


def test_a_lost_job_needs_a_reason_and_a_decision() -> None:
    instance = read_instance(LOST_FILE)
    no_reason = _with(instance, start("q1", ["a01/2", "a01/3"], 3600))
    no_reason = no_reason.with_changes(
        jobs=tuple(
            JobDecision(item.id, Action.LOST) if item.id == "r-gpu" else item
            for item in no_reason.jobs
        )
    )
    assert found(check(instance, no_reason)) == {("lost", "r-gpu")}
    missing = no_reason.with_changes(
        jobs=tuple(item for item in no_reason.jobs if item.id != "r-gpu")
    )
    assert found(check(instance, missing)) == {("missing", "r-gpu")}


def test_a_start_on_a_lost_jobs_failed_gpu_is_refused() -> None:
    instance = _tight()
    decision = _with(instance, start("q", ["a0/2", "a0/3"]))
    assert ("failed-hardware", "q") in found(check(instance, decision))


# -- the round API --------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["wspt", "cpsat"])
def test_shares_of_one_gpu_are_lost_together_when_their_node_goes_down(solver: str) -> None:
    shares = (
        RunningJob("s0", ("a0/1",), 500, gpu_milli=300),
        RunningJob("s1", ("a0/1",), 900, gpu_milli=500),
    )
    cluster = Instance(
        name="shared",
        gpu_types={"A100": GpuType("A100", 80)},
        nodes=(Node("a0", "A100", 4, "pcie"), Node("a1", "A100", 4, "pcie")),
        running=shares,
        queue=(QueuedJob("q", 2, 100, topology="any"),),
    )
    scheduler = Scheduler(cluster, solver)
    scheduler.set_node_down("a0")
    snapshot = scheduler.snapshot(0)  # two lost shares of one GPU: not a double booking
    assert [job.id for job in snapshot.lost] == ["s0", "s1"]
    decision = scheduler.decide(0)
    assert check(snapshot, decision) == []
    assert {item.id for item in decision.by_action(Action.LOST)} == {"s0", "s1"}
    assert set(scheduler.queue) == {"s0", "s1"} and set(scheduler.running) == {"q"}
    # Shares that would not fit one GPU are refused, lost or not.
    too_much = (shares[0], RunningJob("s1", ("a0/1",), 900, gpu_milli=800))
    with pytest.raises(FieldError, match="add up to 1100"):
        snapshot.replace(lost=too_much)


def test_the_round_api_requeues_a_lost_job_from_its_last_checkpoint() -> None:
    cluster = read_instance(LOST_FILE).replace(now=10_000)
    scheduler = Scheduler(cluster, "wspt")
    snapshot = scheduler.snapshot(10_000)
    assert [job.id for job in snapshot.lost] == ["r-down", "r-gpu"]
    decision = scheduler.decide(10_000)
    assert check(snapshot, decision) == []
    assert _lost_items(decision) == REASONS
    assert set(scheduler.running) == {"r-ok", "q1"}
    again = scheduler.queue["r-down"]
    # 1200 s left + 600 s since its checkpoint (at speed 1.0) + 60 s restore.
    assert again.duration_s == 1200 + 600 + 60
    assert (again.gpu_count, again.submitted_at) == (4, 10_000 - 3600)
    # No checkpoint known: everything since it started (300 s) is done again.
    assert scheduler.queue["r-gpu"].duration_s == 900 + 300
    assert scheduler.snapshot(10_000).lost == ()


def test_a_lost_job_restarts_on_healthy_gpus_the_next_round() -> None:
    cluster = Instance(
        name="two",
        gpu_types={"A100": GpuType("A100", 80, speed=2.0)},
        nodes=(Node("a0", "A100", 8, "nvswitch"), Node("a1", "A100", 8, "nvswitch")),
    )
    scheduler = Scheduler(cluster, "wspt", checkpoint_interval_s=1000, checkpoint_s=30)
    scheduler.submit(QueuedJob("big", 8, 8000, submitted_at=0))
    scheduler.decide(0)
    node = scheduler.running["big"].gpus[0].rpartition("/")[0]
    assert scheduler.set_node_down(node) == ["big"]  # not requeued by the caller
    snapshot = scheduler.snapshot(2500)
    decision = scheduler.decide(2500)
    assert check(snapshot, decision) == []
    assert _lost_items(decision) == {"big": f"node {node} is down"}
    # 2500 s at speed 2 is 5000 of 8000 work; saved at 2000 s (4000 work): 4000 left,
    # i.e. 2000 s on this type, plus the 30 s restore.
    assert scheduler.queue["big"].duration_by_type_s == (("A100", 2030),)
    snapshot = scheduler.snapshot(2600)
    decision = scheduler.decide(2600)
    assert check(snapshot, decision) == []
    assert decision.job("big").action is Action.START
    assert not any(gpu.startswith(node + "/") for gpu in scheduler.running["big"].gpus)


def test_the_round_api_decides_with_cpsat_by_default() -> None:
    scheduler = Scheduler(_tight(), options=SolveOptions(time_limit_s=1))
    snapshot = scheduler.snapshot(0)
    decision = scheduler.decide(0)
    assert (scheduler.solver, decision.solver) == ("cpsat", "cpsat")
    assert check(snapshot, decision) == []
    assert _lost_items(decision) == {"r-gpu": "GPU a0/3 failed"}
    assert set(scheduler.running) == {"r-ok", "q"} and set(scheduler.queue) == {"r-gpu"}
