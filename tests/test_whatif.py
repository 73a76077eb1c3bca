"""What-if: each change kind on two-racks-mixed, and the CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from whale_opt.cli import main
from whale_opt.decision import Action
from whale_opt.explain import Change, apply_change, read_jobs, whatif
from whale_opt.io import read_instance
from whale_opt.problem_data import GpuType, Instance, Node, RunningJob

SMALL = Path(__file__).resolve().parent.parent / "instances" / "small" / "two-racks-mixed.json"


def _add_file(tmp_path: Path) -> Path:
    path = tmp_path / "add.json"
    item = {"id": "n1", "gpus": 8, "duration_s": 3600, "weight": 5, "topology": "node"}
    path.write_text(json.dumps({"queue": [item]}))
    return path


def test_add_job(tmp_path: Path) -> None:
    result = whatif(read_instance(SMALL), Change("add-jobs", jobs=read_jobs(_add_file(tmp_path))))
    changed = {item.job_id: item for item in result.jobs}
    assert changed["n1"].before is None and changed["n1"].after is not None
    assert result.objective_delta > 0


def test_fail_node_requeues_its_running_job() -> None:
    result = whatif(read_instance(SMALL), Change("fail-node", "a01"))
    changed = {item.job_id: item for item in result.jobs}
    after = changed["r1"].after
    assert after is not None and after.action is not Action.KEEP
    assert all(not gpu.startswith("a01/") for item in result.after.jobs for gpu in item.gpu_ids)


def test_drain_keeps_running_jobs_but_takes_no_new_work() -> None:
    result = whatif(read_instance(SMALL), Change("drain", "a01"))
    assert result.after.job("r1").action is Action.KEEP
    assert all(not gpu.startswith("a01/") for item in result.after.jobs for gpu in item.gpu_ids)
    assert "q2" in {item.job_id for item in result.jobs}


def test_quota() -> None:
    result = whatif(read_instance(SMALL), Change("quota", "cv", 2))
    assert result.after.job("q2").action is not Action.START
    assert any(item.start_moved for item in result.jobs)
    assert result.to_dict()["change"] == {"kind": "quota", "target": "cv", "value": 2}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_cli_explain_text_and_json() -> None:
    code, out = _run("explain", str(SMALL))
    assert code == 0 and "q4: deferred" in out and "[no-hardware]" in out and "what if:" in out
    code, out = _run("explain", str(SMALL), "q5", "--json")
    (item,) = json.loads(out)
    assert code == 0 and item["id"] == "q5" and item["reasons"][0]["kind"] == "busy"
    assert any(cf["verified"] for cf in item["counterfactuals"])


def test_cli_whatif_text_and_json(tmp_path: Path) -> None:
    code, out = _run("whatif", str(SMALL), "--fail-node", "a01")
    assert code == 0 and "node a01 fails" in out and "objective" in out
    code, out = _run("whatif", str(SMALL), "--add-job", str(_add_file(tmp_path)), "--json")
    assert code == 0 and json.loads(out)["change"]["jobs"] == ["n1"]
    code, out = _run("whatif", str(SMALL), "--quota", "cv=2", "--json")
    assert code == 0 and json.loads(out)["objective_after"] > json.loads(out)["objective_before"]


@pytest.mark.parametrize(
    "args",
    [
        ("explain", "missing.json"),
        ("explain", str(SMALL), "nope"),
        ("whatif", str(SMALL)),
        ("whatif", str(SMALL), "--quota", "cv"),
        ("whatif", str(SMALL), "--drain", "zz"),
        ("whatif", str(SMALL), "--add-job", "missing.json"),
    ],
)
def test_cli_bad_input_exits_2(args: tuple[str, ...]) -> None:
    code, out = _run(*args)
    assert code == 2 and "error:" in out


def test_add_job_file_errors_name_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"queue": [{"id": "x", "gpus": -1, "duration_s": 1}]}))
    code, out = _run("whatif", str(SMALL), "--add-job", str(path))
    assert code == 2 and "queue[0].gpus" in out


def test_fail_node_requeues_shares_and_cpu_only_jobs_as_they_ran() -> None:
    nodes = (Node("n0", "A", 4, cpu=64, memory_gb=256), Node("n1", "A", 4, cpu=64, memory_gb=256))
    running = (
        RunningJob("share", ("n0/0",), 600, gpu_milli=300),
        RunningJob("cpu", (), 900, cpu=8, node="n0"),
        RunningJob("other", ("n1/0",), 600),
    )
    instance = Instance("fail", {"A": GpuType("A", 80, speed=2.0)}, nodes, running)
    after = apply_change(instance, Change("fail-node", "n0"))
    assert [job.id for job in after.running] == ["other"]
    requeued = {job.id: job for job in after.queue}
    share, cpu = requeued["share"], requeued["cpu"]
    assert (share.gpu_count, share.gpu_milli, share.duration_s) == (1, 300, 1_200)
    assert (cpu.gpu_count, cpu.cpu, cpu.duration_s, cpu.gpu_types) == (0, 8, 900, ())
