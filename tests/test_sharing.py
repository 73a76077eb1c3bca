"""GPU sharing: shares of one GPU (``gpu_milli``) and CPU-only jobs (``gpus`` 0)
in the records, the checker, the placement search, every policy and the files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from check_builders import decide, found, planned, start
from hypothesis import HealthCheck, given, settings

from whale_opt.check import check
from whale_opt.decision import Action, JobDecision, Status
from whale_opt.explain import explain
from whale_opt.io import read_instance, write_instance
from whale_opt.options import SolveOptions
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
from whale_opt.solve import solve
from whale_opt.testing import instances

TYPES = {"A100": GpuType("A100", 80)}
POLICIES = ("fifo", "sjf", "wspt", "best-fit", "frag-aware", "las", "hybrid", "cpsat")


def round_of(*queue: QueuedJob, running: tuple[RunningJob, ...] = ()) -> Instance:
    nodes = (
        Node("n0", "A100", 4, "nvswitch", cpu=64, memory_gb=256),
        Node("n1", "A100", 4, "nvswitch", cpu=64, memory_gb=256),
    )
    return Instance("share", TYPES, nodes, running, queue, policy=Policy(aging_per_hour=0))


def share(job_id: str, milli: int, duration: int = 100) -> QueuedJob:
    return QueuedJob(job_id, 1, duration_s=duration, gpu_milli=milli)


def running_share(job_id: str, gpu: str, milli: int, remaining: int = 500) -> RunningJob:
    return RunningJob(job_id, (gpu,), remaining, gpu_milli=milli)


# -- records ------------------------------------------------------------------


def test_a_share_is_of_one_gpu() -> None:
    with pytest.raises(FieldError) as caught:
        QueuedJob("q", 2, duration_s=1, gpu_milli=500)
    assert caught.value.path == "gpu_milli"
    with pytest.raises(FieldError):
        QueuedJob("q", 1, duration_s=1, gpu_milli=1001)
    assert QueuedJob("q", 1, duration_s=1, gpu_milli=470).gpu_amount == pytest.approx(0.47)
    assert QueuedJob("q", 0, duration_s=1).cpu_only


def test_running_shares_of_a_gpu_add_up_to_at_most_one_gpu() -> None:
    with pytest.raises(FieldError, match="add up to 1100"):
        round_of(running=(running_share("a", "n0/0", 600), running_share("b", "n0/0", 500)))
    ok = round_of(running=(running_share("a", "n0/0", 600), running_share("b", "n0/0", 400)))
    assert len(ok.running) == 2


@pytest.mark.parametrize("alias", ["n0/03", "n0/\u0663", "n0/+3", "n0/ 3"])
def test_a_gpu_has_one_id_so_two_jobs_cannot_hold_it_under_two(alias: str) -> None:
    # "n0/03" or an Arabic-Indic three would name GPU n0/3 a second time: were
    # either accepted, a second job could hold that GPU under it.
    whole = (RunningJob("a", ("n0/3",), 500),)
    with pytest.raises(FieldError) as caught:
        round_of(running=(*whole, RunningJob("b", (alias,), 500)))
    assert caught.value.path == "running[1].gpus[0]"
    assert "no leading zeros" in caught.value.message


# -- the checker ----------------------------------------------------------------


def test_checker_accepts_shares_that_fit_and_flags_one_that_overflows() -> None:
    inst = round_of(share("q1", 300), share("q2", 300), running=(running_share("r", "n0/0", 500),))
    fits = decide(inst, start("q1", ["n0/0"]), start("q2", ["n0/1"]))
    assert check(inst, fits) == []
    over = decide(inst, start("q1", ["n0/0"]), start("q2", ["n0/0"]))
    assert ("gpu-share", "q2") in found(check(inst, over))


def test_checker_flags_a_whole_gpu_job_on_a_shared_gpu() -> None:
    inst = round_of(QueuedJob("w", 2, duration_s=100), running=(running_share("r", "n0/0", 100),))
    assert ("gpu-twice", "w") in found(check(inst, decide(inst, start("w", ["n0/0", "n0/1"]))))
    assert check(inst, decide(inst, start("w", ["n0/2", "n0/1"]))) == []


def test_a_shared_gpu_counts_whole_until_its_last_share_ends() -> None:
    # Three whole GPUs free now, one shared until 500: a 4-GPU job cannot be planned
    # before 500 on n0 by count.
    inst = round_of(QueuedJob("w", 4, duration_s=100), running=(running_share("r", "n0/0", 100),))
    early = decide(inst, planned("w", 10, 110, ["n0"], [4]))
    assert ("capacity", "w") in found(check(inst, early))
    assert check(inst, decide(inst, planned("w", 500, 600, ["n0"], [4]))) == []


def test_cpu_only_job_names_its_node() -> None:
    inst = round_of(QueuedJob("c", 0, duration_s=100, cpu=8))
    item = JobDecision("c", Action.START, start_s=0, end_s=100, nodes=("n1",))
    assert check(inst, decide(inst, item)) == []
    nowhere = JobDecision("c", Action.START, start_s=0, end_s=100)
    assert ("planned-nodes", "c") in found(check(inst, decide(inst, nowhere)))
    hog = round_of(QueuedJob("c", 0, duration_s=100, cpu=80))
    assert ("capacity", "c") in found(check(hog, decide(hog, item)))


def test_a_tenant_over_its_gpu_quota_still_starts_a_cpu_only_job() -> None:
    # The quota counts GPUs: a job holding none adds nothing to an overrun.
    inst = round_of(
        QueuedJob("c", 0, duration_s=10, cpu=1, tenant="nlp"),
        running=(RunningJob("r", ("n0/0", "n0/1"), 50, tenant="nlp"),),
    )
    inst = dataclasses.replace(inst, tenants={"nlp": Tenant("nlp", gpu_quota=0)})
    for name in POLICIES:
        decision = solve(inst, name)
        assert check(inst, decision) == [], name
        assert decision.job("c").start_s == 0, name
        assert decision.bound <= decision.objective, name


# -- the placement search ---------------------------------------------------------


def test_shares_pack_onto_a_shared_gpu_before_taking_a_free_one() -> None:
    inst = round_of(share("q1", 400), share("q2", 100), running=(running_share("r", "n1/2", 500),))
    decision = solve(inst, "wspt")
    assert check(inst, decision) == []
    starts = {item.id: item.gpu_ids for item in decision.jobs if item.action is Action.START}
    assert starts == {"q1": ("n1/2",), "q2": ("n1/2",)}


def test_a_share_waits_when_no_gpu_has_room_and_whole_jobs_avoid_shared_gpus() -> None:
    busy = tuple(RunningJob(f"r{k}", (f"n{k // 4}/{k % 4}",), 300 + k) for k in range(7))
    inst = round_of(share("q", 600), running=(*busy, running_share("s", "n1/3", 500)))
    decision = solve(inst, "wspt")
    assert check(inst, decision) == []
    item = decision.job("q")
    assert item.action is Action.PLANNED and item.start_s == 300  # the first GPU to free


def test_fractions_and_cpu_only_jobs_round_trip_through_files(tmp_path: Path) -> None:
    inst = round_of(
        share("q1", 250),
        QueuedJob("c", 0, duration_s=10, cpu=2),
        running=(running_share("r", "n0/0", 500), RunningJob("rc", (), 50, node="n1", cpu=4)),
    )
    path = tmp_path / "share.json"
    write_instance(path, inst)
    again = read_instance(path)
    assert again.queue == inst.queue and again.running == inst.running


# -- every policy, through the checker ------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(sharing=True, min_queue=1))
def test_every_policy_decides_sharing_rounds_validly(instance: Instance) -> None:
    for name in POLICIES:
        decision = solve(instance, name, SolveOptions(time_limit_s=2, seed=0))
        assert check(instance, decision) == [], name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(sharing=True, min_queue=1, max_queue=5, max_nodes=3))
def test_a_proven_cpsat_optimum_is_never_beaten_by_a_heuristic(instance: Instance) -> None:
    # The whole round's model decides shares exactly (every GPU with room, every free
    # GPU): when it proves its optimum, no valid decision may do better.
    best = solve(instance, "cpsat", SolveOptions(time_limit_s=5, seed=0))
    assert check(instance, best) == []
    if best.status is not Status.OPTIMAL:
        return
    for name in POLICIES[:-1]:
        other = solve(instance, name)
        assert best.objective <= other.objective * (1 + 1e-9) + 1e-6, name


def test_why_pending_names_the_largest_free_share() -> None:
    inst = Instance(
        "why",
        TYPES,
        (Node("n0", "A100", 2, "nvswitch", cpu=64, memory_gb=256),),
        (running_share("r0", "n0/0", 690, 100), RunningJob("r1", ("n0/1",), 300)),
        (share("s", 470),),
    )
    (answer,) = explain(inst, with_counterfactuals=False)
    share_reason = next(r for r in answer.reasons if r.kind == "share")
    assert share_reason.message == (
        "no single GPU has 470 milli free; the largest free share is 310 on n0/0"
    )
    assert share_reason.facts["largest_free_milli"] == 310


def test_a_cpu_only_job_on_a_down_node_is_lost(tmp_path: Path) -> None:
    inst = round_of(running=(RunningJob("c", (), 50, node="n1", cpu=4),))
    path = tmp_path / "down.json"
    write_instance(path, inst)
    raw = path.read_text().replace('"id": "n1"', '"id": "n1", "down": true')
    path.write_text(raw)
    again = read_instance(path)
    assert [job.id for job in again.lost] == ["c"] and not again.running
    decision = solve(again, "wspt")
    assert decision.job("c").action is Action.LOST
    assert decision.job("c").reason == "node n1 is down"
    assert check(again, decision) == []
