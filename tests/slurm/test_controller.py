"""The controller loop against a fake Slurm that replays recorded documents."""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from whale_opt.decision import Action, JobDecision
from whale_opt.problem_data import GpuType
from whale_opt.slurm import BridgeOptions, SlurmController, SlurmRunner, SlurmUnavailable
from whale_opt.slurm import controller as controller_module
from whale_opt.slurm.runner import CommandResult

from .conftest import Recorded
from .test_commands import decision, start

INDEXED = BridgeOptions(gres_mode="indexed", gpu_types={"a100": GpuType("a100", 80.0)})


class FakeSlurm(SlurmRunner):
    """Answers squeue/sinfo with documents, records every other command.

    ``fail``: commands (joined argv) that exit 1; ``down``: raise
    :class:`SlurmUnavailable` for every command while positive (counts down);
    ``drop``: a command that raises SlurmUnavailable (the controller dies).
    """

    def __init__(self, squeue: dict[str, Any], sinfo: dict[str, Any]) -> None:
        super().__init__(timeout_s=1.0)
        self.squeue = squeue
        self.sinfo = sinfo
        self.calls: list[str] = []
        self.fail: set[str] = set()
        self.down = 0
        self.drop: str | None = None

    def run(self, argv: Sequence[str]) -> CommandResult:
        command = " ".join(argv)
        if self.down > 0:
            self.down -= 1
            raise SlurmUnavailable(f"'{command}' timed out after 1 s")
        if command == self.drop:
            raise SlurmUnavailable(f"'{command}': Unable to contact slurm controller")
        if argv[0] in ("squeue", "sinfo"):
            document = self.squeue if argv[0] == "squeue" else self.sinfo
            return CommandResult(tuple(argv), 0, json.dumps(document), "", 0.0)
        self.calls.append(command)
        if command in self.fail:
            return CommandResult(tuple(argv), 1, "", "Invalid GRES specification", 0.0)
        return CommandResult(tuple(argv), 0, "", "", 0.0)


def controller(recording: Recorded, **kwargs: Any) -> tuple[SlurmController, FakeSlurm]:
    """A controller on a fake Slurm replaying ``recording`` (clock fixed at its read)."""
    fake = FakeSlurm(copy.deepcopy(recording.squeue), copy.deepcopy(recording.sinfo))
    made = SlurmController(
        fake,
        kwargs.pop("options", INDEXED),
        solver="wspt",
        time_limit_s=1.0,
        clock=lambda: recording.now,
        **kwargs,
    )
    return made, fake


def test_a_round_starts_what_whale_opt_starts(indexed: Recorded) -> None:
    made, fake = controller(indexed)
    report = made.round()
    assert report.decision is not None
    started = {item.id: item.gpu_ids for item in report.decision.by_action(Action.START)}
    assert report.started == list(started) and report.failed == []
    assert made.placed == started
    for job_id in started:
        assert f"scontrol release {job_id}" in fake.calls
    assert {job_id for job_id, _ in report.skipped} == {"10", "11", "12"}


def test_dry_run_changes_nothing(indexed: Recorded) -> None:
    made, fake = controller(indexed, dry_run=True)
    report = made.round()
    assert report.commands and report.started == []
    assert fake.calls == []


def test_a_failed_step_is_undone(indexed: Recorded) -> None:
    made, fake = controller(indexed)
    made.decide = lambda snapshot: decision(start("7", "n1/0", "n1/1", "n1/3", "n1/4"))  # type: ignore[method-assign]
    fake.fail.add("scontrol update JobId=7 NumNodes=1 NodeList=n1 StartTime=now")
    report = made.round()
    assert report.failed == [("7", "Invalid GRES specification")]
    assert fake.calls[-2:] == [
        "scontrol update JobId=7 TresPerNode=",
        "scontrol update JobId=7 TresPerNode=gres:gpu:4",
    ]
    assert "scontrol release 7" not in fake.calls and made.placed == {}


def test_an_interrupted_start_is_repaired_next_round(indexed: Recorded) -> None:
    made, fake = controller(indexed)
    made.decide = lambda snapshot: decision(start("7", "n1/0", "n1/1", "n1/3", "n1/4"))  # type: ignore[method-assign]
    indices = "gres:gpu:g0:1,gres:gpu:g1:1,gres:gpu:g3:1,gres:gpu:g4:1"
    fake.drop = f"scontrol update JobId=7 TresPerNode={indices}"
    with pytest.raises(SlurmUnavailable):
        made.round()
    # What Slurm shows now: job 7 held, its request cleared by the first step.
    for record in fake.squeue["jobs"]:
        if record["job_id"] == 7:
            record["tres_per_node"] = ""
    fake.drop = None
    fake.calls.clear()
    made.decide = lambda snapshot: None  # type: ignore[method-assign]
    made.round()
    assert fake.calls == [
        "scontrol update JobId=7 TresPerNode=",
        "scontrol update JobId=7 TresPerNode=gres:gpu:4",
    ]


def test_a_decision_failing_the_checker_is_not_carried_out(
    indexed: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = start("7", "n1/2", "n1/5", "n1/0", "n1/1")  # n1/2 and n1/5 are job 2's
    monkeypatch.setattr(controller_module, "solve", lambda *a, **k: decision(busy))
    made, fake = controller(indexed)
    report = made.round()
    assert report.decision is None and fake.calls == []


def test_slurm_running_a_job_elsewhere_is_reported(indexed: Recorded) -> None:
    made, fake = controller(indexed)
    made.decide = lambda snapshot: decision(start("8", "n1/0"))  # type: ignore[method-assign]
    made.round()
    for record in fake.squeue["jobs"]:
        if record["job_id"] == 8:
            record.update(
                job_state="RUNNING", priority=1, nodes="n1", gres_detail=["gpu:g1:1(IDX:1)"]
            )
    made.decide = lambda snapshot: None  # type: ignore[method-assign]
    made.round()
    assert made.mismatches == [("8", ("n1/0",), ("n1/1",))]
    assert made.placed == {}


def test_preemption_requeues_held(plain: Recorded) -> None:
    made, fake = controller(plain, options=BridgeOptions(allow_preemption=True))
    made.decide = lambda snapshot: decision(JobDecision("2", Action.PREEMPT))  # type: ignore[method-assign]
    report = made.round()
    assert report.preempted == ["2"] and fake.calls == ["scontrol requeuehold 2"]


def test_once_returns_1_when_slurm_is_down(indexed: Recorded, caplog: Any) -> None:
    made, fake = controller(indexed)
    fake.down = 1
    assert made.run(once=True) == 1
    assert "controller unreachable" in caplog.text


def test_the_loop_backs_off_and_recovers(indexed: Recorded, caplog: Any) -> None:
    caplog.set_level(logging.INFO, "whale_opt")
    made, fake = controller(indexed, dry_run=True)
    fake.down = 3  # three failed reads, then Slurm answers
    assert made.run(interval_s=0.01, max_rounds=2) == 0
    retries = [r.message for r in caplog.records if "retry" in r.message]
    assert len(retries) == 3
    assert "retry 3 in 0.04 s" in retries[-1]  # 0.01 s, doubled each time
    assert "reachable again after 3 attempt(s)" in caplog.text


def test_the_loop_stops_when_told(indexed: Recorded) -> None:
    made, fake = controller(indexed, dry_run=True)
    fake.down = 10**9
    stop = threading.Event()
    worker = threading.Thread(target=made.run, kwargs={"interval_s": 0.05, "stop": stop})
    worker.start()
    stop.set()
    worker.join(timeout=5)
    assert not worker.is_alive()
