"""What-if: each change kind on two-racks-mixed, and the CLI end to end."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from whale_opt.cli import main
from whale_opt.decision import Action
from whale_opt.explain import Change, apply_change, read_jobs, whatif
from whale_opt.explain.whatif import add_jobs
from whale_opt.io import InputError, read_instance
from whale_opt.problem_data import FieldError, GpuType, Instance, Node, RunningJob
from whale_opt.solve import solve

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


def test_fail_node_loses_its_jobs_and_requeues_them_from_the_last_checkpoint() -> None:
    """Before, r1 was requeued with its 7,200 s remaining alone, as if it could move."""
    instance = read_instance(SMALL)
    result = whatif(instance, Change("fail-node", "a01"))
    r1 = {item.job_id: item for item in result.jobs}["r1"]
    assert r1.lost == "node a01 is down"
    assert r1.after is not None and r1.after.start_s is not None and r1.after.end_s is not None
    # remaining 7,200 s + 3,600 s run since started_at (no checkpoint) + 120 s restore
    assert r1.after.end_s - r1.after.start_s == 7_200 + 3_600 + 120
    as_json = {item["id"]: item for item in result.to_dict()["jobs"]}
    assert as_json["r1"]["lost"] == "node a01 is down"
    assert "r1" in result.render() and "lost (node a01 is down)" in result.render()
    # The same node down in the file: solve reports r1 lost for the same reason.
    down = instance.replace(
        nodes=tuple(replace(n, down=n.id == "a01") for n in instance.nodes),
        running=tuple(j for j in instance.running if j.id != "r1"),
        lost=tuple(j for j in instance.running if j.id == "r1"),
    )
    assert solve(down, "wspt").job("r1").reason == r1.lost


def test_fail_node_requeue_counts_work_since_the_checkpoint() -> None:
    nodes = (Node("n0", "A", 4, cpu=64, memory_gb=256), Node("n1", "A", 4, cpu=64, memory_gb=256))
    running = (
        RunningJob("r", ("n0/0",), 600, started_at=-1_000, since_checkpoint_s=300, checkpoint_s=50),
    )
    instance = Instance("fail", {"A": GpuType("A", 80)}, nodes, running)
    (job,) = apply_change(instance, Change("fail-node", "n0")).queue
    assert job.duration_s == 600 + 300 + 50


def test_drain_keeps_running_jobs_but_takes_no_new_work() -> None:
    result = whatif(read_instance(SMALL), Change("drain", "a01"))
    assert result.after.job("r1").action is Action.KEEP
    assert all(not gpu.startswith("a01/") for item in result.after.jobs for gpu in item.gpu_ids)
    assert "q2" in {item.job_id for item in result.jobs}


def test_preempting_a_job_that_is_not_running_is_refused_by_name() -> None:
    # It was a what-if of no change at all, answered as if the job had been preempted.
    with pytest.raises(FieldError, match=r"value\[1\]: names no running job .*'nope'"):
        apply_change(read_instance(SMALL), Change("preempt", value=["r1", "nope"]))


@pytest.mark.parametrize("value", ["x", -1, 2.5, True, None])
def test_a_quota_that_is_not_a_whole_number_of_gpus_is_refused_by_name(value: object) -> None:
    # "x" was int()'s own message, under no field.
    with pytest.raises(FieldError, match="value: must be a whole number of GPUs >= 0"):
        apply_change(read_instance(SMALL), Change("quota", "cv", value))


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


def test_cli_whatif_fail_node_shows_the_job_lost() -> None:
    code, out = _run("whatif", str(SMALL), "--fail-node", "a01")
    r1 = next(line for line in out.splitlines() if line.startswith("r1 "))
    assert code == 0 and "lost (node a01 is down), requeued: start 0-10920" in r1


@pytest.mark.parametrize(
    ("items", "where"),
    [
        ([{"id": "q1", "gpus": 1, "duration_s": 60}], "queue[0].id: duplicate job id"),
        ({"queue": [{"id": "r1", "gpus": 1, "duration_s": 60}]}, "queue[0].id: duplicate job id"),
        (
            [
                {"id": "z1", "gpus": 1, "duration_s": 60},
                {"id": "z2", "gpus": 1, "duration_s": 60, "gpu_types": ["B200"]},
            ],
            "queue[1].gpu_types[0]: is not in gpu_types (a typo?); the types are"
            ' H100-80G, A100-80G, V100-32G (got "B200")',
        ),
        ([{"id": "z", "gpus": 1, "duration_s": 60}] * 2, "queue[1].id: duplicate job id"),
    ],
)
def test_add_job_errors_name_the_added_file_and_index(
    tmp_path: Path, items: object, where: str
) -> None:
    """Before: `add job(s) q1: queue[6].id`, a path in the merged queue, no file."""
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(items))
    code, out = _run("whatif", str(SMALL), "--add-job", str(path))
    assert code == 2 and f"error: {path}: {where}" in out
    with pytest.raises(InputError, match=r"jobs\.json: queue\["):
        read_jobs(path, into=read_instance(SMALL))


def test_add_jobs_locates_errors_among_the_added_jobs() -> None:
    job = read_instance(SMALL).queue[0]
    with pytest.raises(FieldError) as caught:
        add_jobs(read_instance(SMALL), [job])
    assert caught.value.path == "[0].id"


def test_add_job_single_object_says_a_list_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"id": "z", "gpus": 1, "duration_s": 60}))
    code, out = _run("whatif", str(SMALL), "--add-job", str(path))
    assert code == 2 and f"error: {path}: " in out and "expected a list of queue items" in out


@pytest.mark.parametrize("command", [("whatif", "--fail-node", "a01"), ("explain", "q5")])
def test_time_limit_is_per_solve_and_overrides_the_file(
    command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    limits: list[float] = []

    def recording(solve_: object) -> object:
        def solve_and_record(instance: object, solver: str, options: object = None) -> object:
            limits.append(options.time_limit_s)  # type: ignore[attr-defined]
            return solve_(instance, solver, options)  # type: ignore[operator]

        return solve_and_record

    # importlib: the package's ``whatif`` attribute is the function, not the module.
    for module in (
        importlib.import_module(f"whale_opt.explain.{m}") for m in ("whatif", "counterfactuals")
    ):
        monkeypatch.setattr(module, "solve", recording(module.solve))
    name, *rest = command
    code, _ = _run(name, str(SMALL), *rest, "--time-limit", "0.25")
    assert code == 0 and len(limits) >= 2 and set(limits) == {0.25}  # the file says 10


@pytest.mark.parametrize("command", ["explain", "whatif"])
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_bad_time_limit_exits_2_naming_the_option(command: str, value: str) -> None:
    args = ["--fail-node", "a01"] if command == "whatif" else []
    code, out = _run(command, str(SMALL), *args, "--time-limit", value)
    assert code == 2 and "error: --time-limit: must be a number > 0" in out


def test_help_says_the_time_limit_is_per_solve() -> None:
    for command in ("explain", "whatif"):
        code, out = _run(command, "--help")
        assert code == 0 and "--time-limit" in out and "per solve" in " ".join(out.split())
