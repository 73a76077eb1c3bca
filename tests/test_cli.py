"""The ``whale-opt`` command line, through click's CliRunner."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from whale_opt.cli import main
from whale_opt.io import InputError, read_decision, read_instance, write_instance

DATA = Path(__file__).resolve().parent / "data"
SMALL = Path(__file__).resolve().parent.parent / "instances" / "small" / "two-racks-mixed.json"
BAD_FILES = sorted(DATA.glob("bad-*"))
GOOD_INSTANCES = [
    "good-minimal.json",
    "good-one-job.json",
    "good-unservable-job.json",
    "good-every-feature.json",
]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def library_error(path: Path) -> InputError:
    """What the library says about ``path`` (read as the format it claims)."""
    reader = read_decision if path.name.startswith("bad-decision") else read_instance
    with pytest.raises(InputError) as caught:
        reader(path)
    return caught.value


def assert_one_error_line(result: Result, expected: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [expected]


# -- validate -----------------------------------------------------------------


@pytest.mark.parametrize("path", BAD_FILES, ids=[p.name for p in BAD_FILES])
def test_validate_bad_file_exits_2_with_one_line(path: Path) -> None:
    result = run("validate", path)
    error = library_error(path)
    assert_one_error_line(result, f"error: {path}: {error.path}: {error.message}")
    assert result.stdout == ""


@pytest.mark.parametrize(
    "name", [*GOOD_INSTANCES, "good-decision.json", "good-decision-every-feature.json"]
)
def test_validate_good_file_exits_0(name: str) -> None:
    result = run("validate", DATA / name)
    assert result.exit_code == 0, result.output
    kind = "decision" if "decision" in name else "instance"
    assert result.stdout == f"ok  {DATA / name} ({kind}@1)\n"
    assert result.stderr == ""


def test_validate_many_files_reports_each_and_exits_2() -> None:
    good, bad = DATA / "good-minimal.json", DATA / "bad-share-of-two-gpus.json"
    result = run("validate", good, bad, SMALL)
    assert result.exit_code == 2
    assert result.stdout.splitlines() == [f"ok  {good} (instance@1)", f"ok  {SMALL} (instance@1)"]
    assert result.stderr.splitlines() == [
        f"error: {bad}: queue[0].gpu_milli: a share below 1000 is of one GPU: gpus must be 1,"
        " got 2 (got 500)",
    ]


def test_validate_missing_file_exits_2() -> None:
    path = DATA / "no-such-file.json"
    result = run("validate", path)
    assert_one_error_line(result, f"error: {path}: (file): cannot read: No such file or directory")


# -- solve --------------------------------------------------------------------


def test_solve_prints_a_table() -> None:
    result = run("solve", SMALL)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["job", "action", "start", "end", "where", "/", "why"]
    for job_id in ("q1", "q2", "q3", "q4", "q5", "q6"):
        assert any(line.split()[:1] == [job_id] for line in lines), job_id
    # cpsat is the default, and proves this six-job round.
    summary = "instance two-racks-mixed  solver cpsat  status optimal"
    assert any(line.startswith(summary) for line in lines)
    assert any(line.startswith("objective ") and " bound " in line for line in lines)


def test_solve_with_the_greedy_is_one_flag_away() -> None:
    result = run("solve", SMALL, "--solver", "wspt")
    assert result.exit_code == 0, result.output
    assert "solver wspt" in result.stdout


def test_solve_json_prints_a_decision() -> None:
    result = run("solve", SMALL, "--json")
    assert result.exit_code == 0, result.output
    raw = json.loads(result.stdout)
    assert raw["format"] == "whale-opt/decision@1"
    assert raw["instance"] == "two-racks-mixed"
    queued = {"q1", "q2", "q3", "q4", "q5", "q6"}
    assert {job["id"] for job in raw["jobs"]} == queued | {"r1", "r2", "r3"}


def test_solve_output_file_passes_check(tmp_path: Path) -> None:
    out = tmp_path / "decision.json"
    result = run("solve", SMALL, "-o", out)
    assert result.exit_code == 0, result.output
    assert read_decision(out).instance == "two-racks-mixed"
    checked = run("check", SMALL, out)
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith(f"ok  {out}: valid for {SMALL}")


def test_solve_bad_file_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = DATA / "bad-gpu-held-twice.json"
    out = tmp_path / "decision.json"
    result = run("solve", bad, "-o", out)
    error = library_error(bad)
    assert_one_error_line(result, f"error: {bad}: {error.path}: {error.message}")
    assert list(tmp_path.iterdir()) == []


def test_solve_into_missing_directory_exits_2_without_traceback(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "decision.json"
    result = run("solve", SMALL, "-o", out)
    assert_one_error_line(result, f"error: {out}: cannot write: no such directory")
    assert not out.parent.exists()


def test_solve_into_an_empty_path_exits_2_naming_the_option() -> None:
    result = run("solve", SMALL, "-o", "")
    assert_one_error_line(result, "error: -o/--output: is empty: give a path to write (got '')")


def test_solve_into_a_folder_exits_2(tmp_path: Path) -> None:
    result = run("solve", SMALL, "-o", tmp_path)
    assert_one_error_line(result, f"error: {tmp_path}: cannot write: is a directory")
    assert list(tmp_path.iterdir()) == []


def test_solve_under_a_file_exits_2(tmp_path: Path) -> None:
    keep = tmp_path / "keep.json"
    keep.write_text("mine")
    result = run("solve", SMALL, "-o", keep / "decision.json")
    assert_one_error_line(
        result, f"error: {keep / 'decision.json'}: cannot write: {keep} is not a directory"
    )
    assert keep.read_text() == "mine"


def test_solve_into_an_unwritable_folder_exits_2(unwritable: Path) -> None:
    out = unwritable / "decision.json"
    result = run("solve", SMALL, "-o", out)
    assert_one_error_line(result, f"error: {out}: cannot write: Permission denied")
    assert not out.exists()


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_solve_onto_its_own_instance_exits_2_and_keeps_it(tmp_path: Path, link: str) -> None:
    instance = tmp_path / "same.json"
    instance.write_bytes(SMALL.read_bytes())
    out = instance if link == "same" else tmp_path / "other.json"
    if link == "symlink":
        out.symlink_to(instance.name)
    elif link == "hardlink":
        os.link(instance, out)
    result = run("solve", instance, "-o", out)
    assert_one_error_line(
        result, f"error: {out}: cannot write: is the input file {instance}; give another path"
    )
    assert instance.read_bytes() == SMALL.read_bytes()


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    """A folder where this process cannot create files: read-only, or /sys for root."""
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o500)
    for candidate in (folder, Path("/sys")):
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except PermissionError:
            return candidate
    pytest.skip("every folder here takes new files")


# -- simulate and train: output folders ---------------------------------------


@pytest.fixture
def replay(tmp_path: Path) -> list[str]:
    """``simulate`` of a one-job trace on the small cluster, without ``-o``."""
    cluster = tmp_path / "cluster.json"
    write_instance(cluster, read_instance(SMALL).replace(running=(), queue=()))
    trace = tmp_path / "jobs.jsonl"
    trace.write_text('{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60}\n')
    return ["simulate", str(trace), "--cluster", str(cluster)]


def test_simulate_and_train_write_into_a_folder_or_exit_2(
    tmp_path: Path, replay: list[str], unwritable: Path
) -> None:
    keep = tmp_path / "keep.json"
    keep.write_text("mine")
    before = sorted(tmp_path.iterdir())
    cases = [
        (keep, f"error: {keep}: cannot write: not a directory"),
        (keep / "sub", f"error: {keep / 'sub'}: cannot write: {keep} is not a directory"),
        (unwritable / "sub", f"error: {unwritable / 'sub'}: cannot write: Permission denied"),
        ("", "error: -o/--output: is empty: give a path to write (got '')"),
    ]
    for out, message in cases:
        result = run(*replay, "-o", out)
        assert_one_error_line(result, message)
        result = run("train", "--timesteps", "1", "-o", out)
        assert_one_error_line(result, message.replace("-o/--output", "-o/--out"))
    assert sorted(tmp_path.iterdir()) == before and keep.read_text() == "mine"
    assert not (unwritable / "sub").exists()


def test_simulate_makes_a_missing_folder(tmp_path: Path, replay: list[str]) -> None:
    out = tmp_path / "new" / "results"
    result = run(*replay, "-o", out)
    assert result.exit_code == 0, result.output
    assert (out / "summary.csv").is_file() and (out / "wspt-jobs.csv").is_file()


# -- check --------------------------------------------------------------------


@pytest.fixture
def solved(tmp_path: Path) -> dict[str, object]:
    """The wspt decision of the small instance, as parsed JSON."""
    result = run("solve", SMALL, "--json")
    assert result.exit_code == 0, result.output
    loaded: dict[str, object] = json.loads(result.stdout)
    return loaded


def _write(tmp_path: Path, raw: dict[str, object]) -> Path:
    path = tmp_path / "doctored.json"
    path.write_text(json.dumps(raw), "utf-8")
    return path


def test_check_good_decision_exits_0() -> None:
    result = run("check", DATA / "good-one-job.json", DATA / "good-decision.json")
    assert result.exit_code == 0, result.output
    assert "(objective 3600)" in result.stdout


def test_check_gpu_used_twice_exits_1(tmp_path: Path, solved: dict[str, object]) -> None:
    jobs = solved["jobs"]
    assert isinstance(jobs, list)
    started = next(job for job in jobs if job["action"] == "start")
    started["gpus"][0] = "a01/0"  # held by running job r1
    result = run("check", SMALL, _write(tmp_path, solved))
    assert result.exit_code == 1, result.output
    assert f"[gpu-twice] {started['id']}: GPU a01/0 is already held by r1" in result.stdout
    assert "violation(s)" in result.stderr
    assert "Traceback" not in result.output


def test_check_changed_objective_exits_1(tmp_path: Path, solved: dict[str, object]) -> None:
    objective = solved["objective"]
    assert isinstance(objective, float | int)
    solved["objective"] = objective - 1000
    result = run("check", SMALL, _write(tmp_path, solved))
    assert result.exit_code == 1, result.output
    assert f"[objective] decision says {objective - 1000}" in result.stdout


def test_check_missing_job_exits_1(tmp_path: Path, solved: dict[str, object]) -> None:
    jobs = solved["jobs"]
    assert isinstance(jobs, list)
    solved["jobs"] = [job for job in jobs if job["id"] != "r2"]
    result = run("check", SMALL, _write(tmp_path, solved))
    assert result.exit_code == 1, result.output
    assert "[missing] r2: has no decision" in result.stdout


EVERY_FEATURE = DATA / "good-every-feature.json"
EVERY_FEATURE_DECISION = DATA / "good-decision-every-feature.json"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad-unknown-priority-class.json", "queue[0].priority_class: is not a priority class"),
        ("bad-guarantee-above-quota.json", "tenants.nlp.guaranteed_gpus: must not exceed"),
        ("bad-preferred-gpu-type-typo.json", "queue[0].preferred_gpu_types[0]: is not in"),
        ("bad-negative-min-run.json", "policy.min_run_s: must be >= 0 (got -60)"),
    ],
)
def test_validate_new_field_errors_exit_2_naming_path_and_value(name: str, message: str) -> None:
    path = DATA / name
    result = run("validate", path)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {path}: {message}")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output


def test_check_every_feature_decision_exits_0() -> None:
    result = run("check", EVERY_FEATURE, EVERY_FEATURE_DECISION)
    assert result.exit_code == 0, result.output
    assert "(objective 27279)" in result.stdout


def _every_feature_decision() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(EVERY_FEATURE_DECISION.read_text("utf-8"))
    return loaded


def test_check_unreported_dropped_preference_exits_1(tmp_path: Path) -> None:
    raw = _every_feature_decision()
    jobs = raw["jobs"]
    assert isinstance(jobs, list)
    del jobs[1]["dropped"]
    result = run("check", EVERY_FEATURE, _write(tmp_path, raw))
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "[preferences] q2: drops ['gpu_type', 'zone'] but reports none"
    ]


def test_check_start_on_a_draining_node_exits_1(tmp_path: Path) -> None:
    raw = _every_feature_decision()
    jobs = raw["jobs"]
    assert isinstance(jobs, list)
    jobs[0]["gpus"] = ["a02/4", "a02/5", "a02/6", "a02/7"]  # a02 drains; same zone, same end
    result = run("check", EVERY_FEATURE, _write(tmp_path, raw))
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        # The spot job r1 is now preempted for nobody.
        "[preemption] r1: no job started on its GPUs outranks it or reclaims a guarantee"
        " from its tenant",
        "[draining] q1: node a02 is draining",
    ]


def test_check_bad_decision_file_exits_2() -> None:
    bad = DATA / "bad-decision-action.json"
    result = run("check", DATA / "good-one-job.json", bad)
    error = library_error(bad)
    assert_one_error_line(result, f"error: {bad}: {error.path}: {error.message}")


# -- schema -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["instance", "decision"])
def test_schema_prints_json(kind: str) -> None:
    result = run("schema", kind)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["$id"] == f"whale-opt/{kind}@1"
    assert printed["properties"]["format"] == {"const": f"whale-opt/{kind}@1"}


def test_schema_unknown_kind_is_a_usage_error() -> None:
    result = run("schema", "cluster")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_validate_deeply_nested_json_exits_2_without_a_traceback(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = run("validate", deep)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{deep}: [0][0]" in result.output


def test_solve_summary_counts_lost_jobs() -> None:
    result = run("solve", DATA / "good-lost-jobs.json", "--solver", "wspt")
    assert result.exit_code == 0, result.output
    assert any(
        line.startswith("start ") and "  lost " in line for line in result.stdout.splitlines()
    )


def test_ray_unreachable_names_our_option_not_rays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: Ray's own hint, 'setting `--address` flag', an option we do not have."""
    import whale_opt.cli.app as app

    def unreachable(kind: str, address: str) -> None:
        raise ConnectionError(
            "Could not find any running Ray instance. Please specify the one to connect to"
            " by setting `--address` flag or `RAY_ADDRESS` environment variable."
        )

    monkeypatch.setattr(app, "make_executor", unreachable)
    result = run("solve", SMALL, "--solver", "wspt", "--executor", "ray")
    assert result.exit_code == 2
    assert "--ray-address" in result.output and "`--address`" not in result.output


def test_import_a_folder_for_a_file_says_it_is_a_folder(tmp_path: Path) -> None:
    """Before: 'no such file' for a folder that plainly exists."""
    result = run("import", "pai", "--machines", tmp_path, "--cluster-out", tmp_path / "c.json")
    assert result.exit_code == 2, result.output
    assert f"error: {tmp_path}: cannot read: is a folder, not a file" in result.output


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_validate_a_trace_says_it_is_not_an_instance(tmp_path: Path, suffix: str) -> None:
    """Before: 'malformed JSON: Extra data' for a JSON-lines trace."""
    path = tmp_path / f"trace{suffix}"
    path.write_text('{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 9}\n{"id": "b"}\n')
    result = run("validate", path)
    assert result.exit_code == 2
    assert "is a job or failure trace (TRACES.md), not an instance or decision file" in (
        result.output
    )
