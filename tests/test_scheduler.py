"""The round API: state carried between rounds, every round's decision checked."""

from __future__ import annotations

from whale_opt.check import check
from whale_opt.decision import Action
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob
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
