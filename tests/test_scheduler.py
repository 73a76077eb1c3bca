"""The round API: state carried between rounds, every round's decision checked."""

from __future__ import annotations

from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.placement.serial import assemble
from whale_opt.problem_data import (
    FieldError,
    GpuType,
    Instance,
    Node,
    Policy,
    QueuedJob,
    RunningJob,
)
from whale_opt.registry import get_policy
from whale_opt.scheduler import Scheduler


def _cluster() -> Instance:
    return Instance(
        name="two-nodes",
        gpu_types={"A100": GpuType("A100", 80, 1.0)},
        nodes=(
            Node("a0", "A100", 8, "nvswitch", cpu=64, memory_gb=512, rack="r0"),
            Node("a1", "A100", 8, "nvswitch", cpu=64, memory_gb=512, rack="r0"),
        ),
    )


def _job(job_id: str, gpus: int, duration: int, submitted: int) -> QueuedJob:
    return QueuedJob(job_id, gpus, duration, submitted_at=submitted)


def _round(scheduler: Scheduler, now: int) -> list[str]:
    snapshot = scheduler.snapshot(now)
    decision = scheduler.decide(now)
    assert check(snapshot, decision) == []
    return [item.id for item in decision.by_action(Action.START)]


def test_jobs_start_run_and_finish_across_rounds() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    for k in range(3):
        scheduler.submit(_job(f"j{k}", 8, 100, submitted=0))
    assert sorted(_round(scheduler, 0)) == ["j0", "j1"]  # two 8-GPU nodes
    assert set(scheduler.running) == {"j0", "j1"} and set(scheduler.queue) == {"j2"}
    scheduler.finish("j0")
    assert _round(scheduler, 100) == ["j2"]
    assert scheduler.running["j2"].started_at == 100


def test_a_node_down_returns_its_jobs_and_requeue_keeps_the_unsaved_work() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(_job("big", 8, 1000, submitted=0))
    _round(scheduler, 0)
    node = scheduler.running["big"].gpus[0].rpartition("/")[0]
    lost = scheduler.set_node_down(node)
    assert lost == ["big"]
    again = scheduler.requeue("big", 0.75, now=400)
    assert again.duration_s == 750 and again.attained_gpu_s == 8 * 400
    started = _round(scheduler, 400)  # the other node takes it; the down one is avoided
    assert started == ["big"]
    assert all(not gpu.startswith(node + "/") for gpu in scheduler.running["big"].gpus)


def test_a_failed_gpu_is_never_handed_out() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.fail_gpu("a0/3")
    scheduler.set_node_down("a1")
    scheduler.submit(_job("seven", 7, 100, submitted=0))
    assert _round(scheduler, 0) == ["seven"]
    assert "a0/3" not in scheduler.running["seven"].gpus
    scheduler.fail_gpu("a0/3", failed=False)
    assert scheduler.nodes["a0"].failed_gpus == ()


def test_snapshot_times_are_relative_to_now() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(_job("j", 8, 500, submitted=50))
    _round(scheduler, 100)
    snapshot = scheduler.snapshot(300)
    (held,) = snapshot.running
    assert held.started_at == -200 and held.remaining_s == 300


def test_a_round_before_a_running_jobs_start_is_refused() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(_job("j", 8, 500, submitted=50))
    _round(scheduler, 100)
    with pytest.raises(ValueError, match="now=99 is before running job 'j' started \\(at 100\\)"):
        scheduler.snapshot(99)


# -- issue 6: classes, checkpoints, restores, drains, preemption, decomposition ----------


def _preemptive() -> Instance:
    return _cluster().replace(policy=Policy(allow_preemption=True))


def test_snapshot_carries_class_checkpoint_and_time_since_the_last_checkpoint() -> None:
    scheduler = Scheduler(_cluster(), "wspt", checkpoint_interval_s=600)
    scheduler.submit(
        QueuedJob("be", 8, 5000, priority_class="best-effort", tenant="cv"), checkpoint_s=90
    )
    _round(scheduler, 0)
    (held,) = scheduler.snapshot(1500).running
    assert (held.priority_class, held.tenant, held.checkpoint_s) == ("best-effort", "cv", 90)
    assert held.since_checkpoint_s == 300  # checkpoints at 600 and 1200
    scheduler.checkpointed("be", 1400)  # a reported checkpoint wins over the interval
    assert scheduler.snapshot(1500).running[0].since_checkpoint_s == 100
    assert scheduler.snapshot(2500).running[0].since_checkpoint_s == 1100


def test_without_checkpoints_a_preemption_loses_the_whole_attempt() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(QueuedJob("j", 8, 5000))
    _round(scheduler, 0)
    (held,) = scheduler.snapshot(700).running
    assert held.since_checkpoint_s is None and held.lost_on_preempt_s == 700
    again = scheduler.requeue("j", None, 700)
    assert again.duration_s == 5000


def test_requeue_keeps_class_tenant_preferences_and_adds_the_restore() -> None:
    cluster = _cluster().replace(
        gpu_types={"A100": GpuType("A100", 80, 1.0), "H100": GpuType("H100", 80, 2.0)}
    )
    scheduler = Scheduler(cluster, "wspt", checkpoint_interval_s=1000, checkpoint_s=50)
    job = QueuedJob(
        "j",
        8,
        4000,
        tenant="nlp",
        weight=3.0,
        submitted_at=-100,
        priority_class="best-effort",
        preferred_gpu_types=("A100",),
        prefer_nvlink=True,
        zone="east",
    )
    scheduler.submit(job)
    _round(scheduler, 0)
    again = scheduler.requeue("j", None, 2500)  # checkpoints at 1000 and 2000 kept
    assert (again.tenant, again.weight, again.priority_class, again.zone) == (
        "nlp",
        3.0,
        "best-effort",
        "east",
    )
    assert again.preferred_gpu_types == ("A100",) and again.prefer_nvlink
    assert again.submitted_at == -100  # aging goes on from the first submission
    # 2000 of 4000 s of work left; the restore is wall time, not sped up on the H100.
    assert dict(again.duration_by_type_s) == {"A100": 2050, "H100": 1050}
    assert again.attained_gpu_s == 8 * 2500
    (restarted,) = _round(scheduler, 2600)
    assert restarted == "j"
    held = scheduler.running["j"]
    assert held.restore_s == 50
    # The restart's own checkpoints count computing after the restore.
    assert scheduler.snapshot(2600 + 50 + 1200).running[0].since_checkpoint_s == 200
    again = scheduler.requeue("j", None, 2600 + 50 + 1200)  # 1000 of the A100's 2000 s kept
    assert dict(again.duration_by_type_s)["A100"] == 1000 + 50


def test_a_draining_node_takes_no_new_work_but_keeps_its_jobs() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(_job("first", 4, 1000, submitted=0))
    _round(scheduler, 0)
    node = scheduler.running["first"].gpus[0].rpartition("/")[0]
    assert scheduler.drain(node) == ["first"]
    assert scheduler.snapshot(10).nodes[scheduler.template.node_index[node]].draining
    scheduler.submit(_job("second", 4, 100, submitted=10))
    assert _round(scheduler, 10) == ["second"]
    assert all(not gpu.startswith(node + "/") for gpu in scheduler.running["second"].gpus)
    assert "first" in scheduler.running  # still running on the draining node
    assert scheduler.drain(node, draining=False) == ["first"]
    assert not scheduler.nodes[node].draining


class _PreemptForQ:
    """Test policy: preempt running ``be`` and start queued ``q`` on its GPUs."""

    name = "hand"

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        victim = next(job for job in instance.running if job.id == "be")
        jobs = [JobDecision("q", Action.START, gpu_ids=victim.gpu_ids, start_s=0, end_s=100)]
        jobs += [
            JobDecision(job.id, Action.PREEMPT if job.id == "be" else Action.KEEP)
            for job in instance.running
        ]
        return assemble(instance, self.name, jobs, Status.FEASIBLE, 0.0, 0.0)


def test_decide_requeues_preempted_jobs_with_the_work_left_at_their_last_checkpoint() -> None:
    scheduler = Scheduler(_preemptive(), _PreemptForQ(), checkpoint_interval_s=300)
    scheduler.submit(QueuedJob("be", 8, 3000, priority_class="best-effort"), checkpoint_s=30)
    scheduler.apply(get_policy("wspt").decide(scheduler.snapshot(0)), 0)
    scheduler.submit(QueuedJob("q", 8, 100, submitted_at=1000))
    snapshot = scheduler.snapshot(1000)
    assert snapshot.running[0].since_checkpoint_s == 100
    decision = scheduler.decide(1000)
    assert check(snapshot, decision) == []
    # Priced as the objective says: class factor 0.1 x (100 s lost + 30 s restore).
    assert decision.objective == pytest.approx(100 + 0.1 * (100 + 30))
    assert set(scheduler.running) == {"q"}
    requeued = scheduler.queue["be"]
    assert requeued.priority_class == "best-effort"
    assert requeued.duration_s == 3000 - 900 + 30


def test_apply_takes_the_callers_remaining_work_for_preempted_jobs() -> None:
    scheduler = Scheduler(_preemptive(), _PreemptForQ(), checkpoint_interval_s=300)
    scheduler.submit(QueuedJob("be", 8, 3000, priority_class="best-effort"))
    scheduler.apply(get_policy("wspt").decide(scheduler.snapshot(0)), 0)
    scheduler.submit(QueuedJob("q", 8, 100, submitted_at=1000))
    decision = scheduler.propose(1000)
    assert "be" in scheduler.running  # propose changes nothing
    scheduler.apply(decision, 1000, {"be": 0.5})
    assert scheduler.queue["be"].duration_s == 1500


def test_initial_running_jobs_keep_class_and_checkpoint_state() -> None:
    held = RunningJob(
        "r",
        tuple(f"a0/{k}" for k in range(8)),
        remaining_s=600,
        started_at=-1200,
        priority_class="best-effort",
        checkpoint_s=45,
        since_checkpoint_s=200,
    )
    scheduler = Scheduler(_cluster().replace(running=(held,), now=10_000), "wspt")
    (again,) = scheduler.snapshot(10_100).running
    assert (again.priority_class, again.checkpoint_s, again.since_checkpoint_s) == (
        "best-effort",
        45,
        300,
    )
    assert (again.started_at, again.remaining_s) == (-1300, 500)


def test_large_rounds_are_split_into_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    import whale_opt.solve as solve_module

    calls: list[int] = []
    real = solve_module.solve_split

    def counted(
        instance: Instance, solve_pool: Any, solver: str, options: Any, **_: Any
    ) -> Decision:
        calls.append(len(instance.nodes))
        return real(instance, solve_pool, solver, options, max_gpus=8)

    monkeypatch.setattr(solve_module, "solve_split", counted)
    scheduler = Scheduler(_cluster(), "wspt", split_above_gpus=8)
    for k in range(3):
        scheduler.submit(_job(f"j{k}", 8, 100, submitted=0))
    assert sorted(_round(scheduler, 0)) == ["j0", "j1"]
    assert calls == [2]


def test_a_wall_clock_of_unix_seconds_runs_rounds() -> None:
    """The round API keeps absolute times (a controller's clock is Unix seconds):
    only instance files hold times relative to ``now`` within their ranges."""
    scheduler = Scheduler(_cluster(), "cpsat")
    now = 1_700_000_000
    scheduler.submit(_job("a", 8, 3600, submitted=now - 60))
    scheduler.submit(_job("b", 8, 7200, submitted=now))
    scheduler.submit(_job("c", 8, 600, submitted=now))
    assert sorted(_round(scheduler, now)) == ["a", "c"]  # the shortest waits least
    scheduler.finish("c")
    assert _round(scheduler, now + 600) == ["b"]
    assert scheduler.running["b"].started_at == now + 600


# -- what the scheduler refuses, by name, before its state goes wrong -----------------


def test_a_job_naming_what_the_cluster_lacks_is_refused_at_submit() -> None:
    # Accepted, it failed every later round's snapshot, and no job started again.
    scheduler = Scheduler(_cluster(), "wspt")
    with pytest.raises(FieldError, match=r"job bad\.gpu_types\[0\]: is not in gpu_types"):
        scheduler.submit(QueuedJob("bad", 1, 100, gpu_types=("a100",)))
    with pytest.raises(FieldError, match=r"job bad\.priority_class"):
        scheduler.submit(QueuedJob("bad", 1, 100, priority_class="urgent"))
    scheduler.submit(_job("good", 1, 100, 0))
    assert _round(scheduler, 0) == ["good"]


def test_two_proposals_on_one_state_cannot_both_be_applied() -> None:
    # The propose-then-apply flow: each proposal is right for the state it saw, but
    # the second, applied after the first, starts b on the GPUs a now holds.
    cluster = Instance("one-node", _cluster().gpu_types, (_cluster().nodes[0],))
    scheduler = Scheduler(cluster, "wspt")
    scheduler.submit(_job("a", 8, 1000, 0))
    first = scheduler.propose(0)
    scheduler.submit(_job("b", 8, 500, 0))
    second = scheduler.propose(0)
    scheduler.apply(first, 0)
    with pytest.raises(ValueError, match=r"job 'b' is started on a0/\d, which running jobs"):
        scheduler.apply(second, 0)
    assert set(scheduler.running) == {"a"} and set(scheduler.queue) == {"b"}  # unchanged
    assert _round(scheduler, 10) == []  # b waits for a; the rounds go on


def test_a_decision_about_jobs_the_scheduler_does_not_hold_is_refused() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    ghost = JobDecision("ghost", Action.START, ("a0/0",), 0, 100)
    decision = Decision("x", "mine", Status.FEASIBLE, 100.0, 0.0, 86_400, (ghost,))
    with pytest.raises(ValueError, match="job 'ghost' is started but not queued"):
        scheduler.apply(decision, 0)
    gone = JobDecision("ghost", Action.PREEMPT)
    decision = Decision("x", "mine", Status.FEASIBLE, 0.0, 0.0, 86_400, (gone,))
    with pytest.raises(ValueError, match="job 'ghost' is preempt but not running"):
        scheduler.apply(decision, 0)


def test_a_cpu_only_job_is_among_a_node_s_jobs_when_it_drains_or_goes_down() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(QueuedJob("cpu", 0, 1000, cpu=4))
    scheduler.submit(_job("gpu", 8, 1000, 0))
    assert sorted(_round(scheduler, 0)) == ["cpu", "gpu"]
    node = scheduler.running["cpu"].node
    assert node is not None
    # The node is empty only once these end: it holds the CPU-only job too.
    assert "cpu" in scheduler.drain(node)
    assert "cpu" in scheduler.set_node_down(node)


@pytest.mark.parametrize("gpu_id", ["a0/03", "a0/x", "a0/8", "zz/0", "a0"])
def test_a_gpu_id_no_gpu_has_is_refused_by_fail_gpu(gpu_id: str) -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    with pytest.raises(ValueError, match=rf"'{gpu_id}'"):
        scheduler.fail_gpu(gpu_id)
    assert all(not node.failed_gpus for node in scheduler.nodes.values())


def test_an_id_the_scheduler_does_not_hold_is_named() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    calls = {
        "finish": lambda: scheduler.finish("nope"),
        "checkpointed": lambda: scheduler.checkpointed("nope", 0),
        "requeue": lambda: scheduler.requeue("nope", None, 0),
        "drain": lambda: scheduler.drain("zz"),
        "set_node_down": lambda: scheduler.set_node_down("zz"),
    }
    for name, call in calls.items():
        with pytest.raises(KeyError) as caught:
            call()
        assert "'nope'" in str(caught.value) or "'zz'" in str(caught.value), name
        assert str(caught.value).startswith(("no job", "the cluster has no node")), name


def test_a_job_running_at_the_start_restarts_in_the_shape_it_ran_in() -> None:
    # The cluster's running job holds a PCIe node whole. Its own placement rule is
    # not known; requeued as an NVLink gang (the default), no node could ever
    # hold it again, and it was deferred forever.
    types = {"A100": GpuType("A100", 80, 1.0)}
    nodes = (Node("p0", "A100", 8, "pcie"), Node("p1", "A100", 8, "pcie"))
    held = RunningJob("r", tuple(f"p0/{i}" for i in range(8)), 1000, started_at=-100)
    scheduler = Scheduler(Instance("pcie", types, nodes, running=(held,)), "wspt")
    assert scheduler.set_node_down("p0") == ["r"]
    again = scheduler.requeue("r", None, 0)
    assert again.topology == "node"
    assert _round(scheduler, 0) == ["r"]


def test_a_cpu_only_job_running_at_the_start_keeps_its_length_when_requeued() -> None:
    # A CPU-only job runs as long on any node: the GPU type's speed is not its pace.
    types = {"V100": GpuType("V100", 32, 0.5)}
    nodes = (Node("v0", "V100", 4, "pcie", cpu=32, memory_gb=64),)
    held = RunningJob("c", (), 900, started_at=0, node="v0", cpu=4)
    scheduler = Scheduler(Instance("cpu", types, nodes, running=(held,)), "wspt")
    assert scheduler.requeue("c", 1.0, 0).duration_s == 900


def test_a_checkpoint_before_the_last_is_refused() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    scheduler.submit(_job("a", 1, 1000, 0))
    assert _round(scheduler, 0) == ["a"]
    scheduler.checkpointed("a", 300)
    with pytest.raises(ValueError, match="precedes its last, at 300"):
        scheduler.checkpointed("a", 100)
    assert scheduler.running["a"].checkpoint_at == 300
