"""A whale_opt Decision -> the scontrol commands that carry it out."""

from __future__ import annotations

from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.problem_data import GpuType
from whale_opt.slurm import BridgeOptions, Snapshot, build_snapshot, plan, render
from whale_opt.solve import solve

from .conftest import Recorded

INDEXED = BridgeOptions(gres_mode="indexed", gpu_types={"a100": GpuType("a100", 80.0)})


def decision(*jobs: JobDecision) -> Decision:
    """A decision of just ``jobs`` (plan reads only their actions and GPUs)."""
    return Decision("t", "test", Status.FEASIBLE, 0.0, 0.0, 1000, tuple(jobs))


def start(job_id: str, *gpus: str) -> JobDecision:
    """``job_id`` starts now on ``gpus``."""
    return JobDecision(job_id, Action.START, gpu_ids=gpus, start_s=0, end_s=60)


def snap(recording: Recorded, options: BridgeOptions | None = None) -> Snapshot:
    """The snapshot of a recording."""
    return build_snapshot(recording.squeue, recording.sinfo, recording.now, options)


def test_plain_start_pins_then_releases(plain: Recorded) -> None:
    commands, refused = plan(snap(plain), decision(start("7", "n1/5", "n1/6")), "plain")
    assert refused == []
    (item,) = commands
    assert item.steps == (
        ("scontrol", "update", "JobId=7", "NumNodes=1", "NodeList=n1", "StartTime=now"),
        ("scontrol", "release", "7"),
    )
    assert item.undo == () and item.gpus == ("n1/5", "n1/6")


def test_indexed_start_clears_then_sets_the_request(indexed: Recorded) -> None:
    chosen = start("7", "n1/0", "n1/1", "n1/3", "n1/4")
    (item,), refused = plan(snap(indexed, INDEXED), decision(chosen), "indexed")
    assert refused == []
    indices = "gres:gpu:g0:1,gres:gpu:g1:1,gres:gpu:g3:1,gres:gpu:g4:1"
    assert [" ".join(step) for step in item.steps] == [
        "scontrol update JobId=7 TresPerNode=",
        f"scontrol update JobId=7 TresPerNode={indices}",
        "scontrol update JobId=7 NumNodes=1 NodeList=n1 StartTime=now",
        "scontrol release 7",
    ]
    # Undo gives back the request as submitted (clear first: Slurm merges typed ones).
    assert [" ".join(step) for step in item.undo] == [
        "scontrol update JobId=7 TresPerNode=",
        "scontrol update JobId=7 TresPerNode=gres:gpu:4",
    ]


def test_indexed_request_already_right_is_kept(indexed: Recorded) -> None:
    (item,), _ = plan(snap(indexed, INDEXED), decision(start("4", "n1/0")), "indexed")
    assert len(item.steps) == 2  # job 4 asks g0 (its earlier placement): pin, release


def test_whole_nodes_keep_their_request(indexed: Recorded) -> None:
    gpus = tuple(f"n{n}/{k}" for n in (1, 4) for k in range(8))
    (item,), refused = plan(snap(indexed, INDEXED), decision(start("9", *gpus)), "indexed")
    assert refused == []
    assert item.steps[0] == (
        "scontrol",
        "update",
        "JobId=9",
        "NumNodes=2",
        "NodeList=n1,n4",
        "StartTime=now",
    )


def test_placements_slurm_cannot_express_are_refused(indexed: Recorded) -> None:
    snapshot = snap(indexed, INDEXED)
    one_node = start("9", *(f"n1/{k}" for k in range(8)))
    short = start("7", "n1/0", "n1/1", "n1/3")
    commands, refused = plan(snapshot, decision(one_node, short), "indexed")
    assert commands == []
    reasons = dict(refused)
    assert "1 node(s), the job asks for 2" in reasons["9"]
    assert "differ from the 4 it asks" in reasons["7"]


def test_preemptions_come_first(plain: Recorded) -> None:
    chosen = decision(
        start("7", "n1/3", "n1/4"),
        JobDecision("2", Action.PREEMPT),
        JobDecision("4", Action.PREEMPT),  # in flight: not started, so not preempted
    )
    commands, refused = plan(snap(plain), chosen, "plain")
    assert [item.action for item in commands] == [Action.PREEMPT, Action.START]
    assert commands[0].steps == (("scontrol", "requeuehold", "2"),)
    assert refused == [("4", "released but not started: not preempted")]
    assert render(commands)[0] == "scontrol requeuehold 2"


def test_a_real_decision_plans_without_refusals(indexed: Recorded) -> None:
    snapshot = snap(indexed, INDEXED)
    chosen = solve(snapshot.instance, "wspt")
    assert check(snapshot.instance, chosen) == []
    commands, refused = plan(snapshot, chosen, "indexed")
    assert refused == []
    started = {item.job_id: item.gpus for item in commands}
    assert started == {item.id: item.gpu_ids for item in chosen.by_action(Action.START)}
    assert started  # the fixture has free GPUs on n1 and held jobs that fit
