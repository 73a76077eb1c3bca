"""Trace files: round trips, and errors that name the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.io import InputError
from whale_opt.problem_data import Instance
from whale_opt.sim import TraceJob, read_outages, read_trace, simulate, synthetic_trace, write_trace


def error_of(path: Path, text: str) -> str:
    path.write_text(text, "utf-8")
    with pytest.raises(InputError) as caught:
        read_trace(path)
    return str(caught.value)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_round_trip(tmp_path: Path, cluster: Instance, suffix: str) -> None:
    trace = synthetic_trace(30, cluster, seed=1)
    write_trace(tmp_path / f"t{suffix}", trace)
    assert read_trace(tmp_path / f"t{suffix}") == trace


def test_fields_defaults_and_conversions(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "id,submit_s,gpus,duration_s,gpu_types,duration_by_type_s,preemptible\n"
        "a,0.5,2,99.2,A100-80G|H100-80G,,no\n"
        "b,10,1,,,A100-80G=3600|V100-32G=8000,\n",
        "utf-8",
    )
    a, b = read_trace(path)
    assert (a.submit_s, a.duration_s, a.gpu_types, a.preemptible) == (
        1,
        100,
        ("A100-80G", "H100-80G"),
        False,
    )
    assert b.duration_by_type_s == (("A100-80G", 3600), ("V100-32G", 8000))
    assert (b.weight, b.tenant, b.topology) == (1.0, "default", "nvlink")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60}\n{"id": "b", "gpus": 1,\n',
            "line 2 column 23: malformed JSON: Expecting property name",
        ),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "gpus": 2, "duration_s": 60}\n',
            "line 1: gpus: duplicate key: given more than once in one object (got 1, then 2)",
        ),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 1' + "0" * 30 + "}\n",
            "line 1: duration_s: integer out of the 64-bit range",
        ),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 9' + "9" * 5000 + "}\n",
            "line 1: duration_s: integer out of the 64-bit range",
        ),
        ('{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 1e400}\n', "line 1: duration_s: "),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 1e30}\n',
            "line 1: duration_s: must be within the 64-bit range",
        ),
        (
            '{"id": "a", "submit_s": 1700000000000, "gpus": 1, "duration_s": 60}\n',
            "line 1: submit_s: must be at most 1000000000 s, about 31.7 years (milliseconds?)"
            " (got 1700000000000)",
        ),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "actual_duration_s": 2e9}\n',
            "line 1: actual_duration_s: must be at most 1000000000 s",
        ),
        ('{"id": "a", "submit_s": 0, "gpus": 1, "x": ' + "[" * 99 + "\n", "line 1: x"),
        (
            '{"id": "a", "submit_s": 0, "gpus": 2, "gpu_milli": 500, "duration_s": 60}\n',
            "line 1: gpu_milli: a share below 1000 is of one GPU: gpus must be 1, got 2 (got 500)",
        ),
        ('{"id": "a", "submit_s": 0, "gpus": "two", "duration_s": 60}\n', "line 1: gpus: must be"),
        (
            '\n\n{"id": "a", "submit_s": 0, "gpu": 1, "duration_s": 60}\n',
            "line 3: unknown field 'gpu' (did you mean 'gpus'?)",
        ),
        ('{"id": "a", "gpus": 1, "duration_s": 60}\n', "line 1: submit_s: is required"),
        ('{"id": "a", "submit_s": 0, "gpus": 1}\n', "line 1: duration_s: give duration_s"),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 9, "topology": "ring"}\n',
            "line 1: topology: must be one of",
        ),
        (
            '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 9}\n'
            '{"id": "a", "submit_s": 5, "gpus": 1, "duration_s": 9}\n',
            "line 2: id: duplicate job id 'a' (first on line 1)",
        ),
        ("[1, 2]\n", "line 1: must be one JSON object"),
        ("", "has no jobs"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "trace.jsonl"
    message = error_of(path, text)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_csv_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    header = "id,submit_s,gpus,duration_s\n"
    assert "line 3: must have 4 comma-separated cells" in error_of(
        path, header + "a,0,1,60\nb,0,1\n"
    )
    assert "line 2: gpus: must be within the 64-bit range, at most" in error_of(
        path, header + "a,0,1e19,60\n"
    )
    assert "line 2: duration_s: must be a number (got 'soon')" in error_of(
        path, header + "a,0,1,soon\n"
    )


def test_bare_carriage_return_in_a_csv_cell_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    message = error_of(path, "id,submit_s,gpus,duration_s\na,0,1,60\nb,0\r,1,60\n")
    assert message == f"{path}: line 3: is not valid CSV: new-line character seen in unquoted field"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_write_trace_is_atomic(
    tmp_path: Path, cluster: Instance, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"t{suffix}"
    path.write_text("the old trace\n")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_trace(path, synthetic_trace(5, cluster, seed=1))
    assert path.read_text() == "the old trace\n"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_write_trace_unknown_suffix_writes_nothing(tmp_path: Path, cluster: Instance) -> None:
    with pytest.raises(InputError, match=r"t\.txt: \(file\): unknown trace format '\.txt'"):
        write_trace(tmp_path / "t.txt", synthetic_trace(5, cluster, seed=1))
    assert list(tmp_path.iterdir()) == []


def test_unknown_suffix_and_missing_file(tmp_path: Path) -> None:
    assert "unknown trace format '.txt'" in error_of(tmp_path / "trace.txt", "x")
    with pytest.raises(InputError, match="cannot read"):
        read_trace(tmp_path / "absent.csv")


def test_outages(tmp_path: Path) -> None:
    path = tmp_path / "failures.jsonl"
    path.write_text(
        '{"node": "a01", "at_s": 60, "repair_s": 600}\n'
        '{"node": "v01", "at_s": 90, "repair_s": 60, "gpu": 3}\n',
        "utf-8",
    )
    first, second = read_outages(path)
    assert (first.node, first.at_s, first.repair_s, first.gpu) == ("a01", 60, 600, None)
    assert second.gpu == 3
    path.write_text('{"node": "a01", "at_s": 60, "repair_s": 0}\n', "utf-8")
    with pytest.raises(InputError, match=r"line 1: repair_s: must be an int >= 1"):
        read_outages(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_classes_checkpoints_and_preferences_round_trip(tmp_path: Path, suffix: str) -> None:
    trace = (
        TraceJob(
            "a",
            0,
            2,
            duration_s=60,
            tenant="cv",
            priority_class="best-effort",
            checkpoint_s=30,
            preferred_gpu_types=("A100-80G", "H100-80G"),
            prefer_nvlink=True,
        ),
        TraceJob("b", 5, 1, duration_s=60, priority_class="online"),
    )
    write_trace(tmp_path / f"t{suffix}", trace)
    again = read_trace(tmp_path / f"t{suffix}")
    assert again == trace
    queued = again[0].queued(60)
    assert (queued.priority_class, queued.preferred_gpu_types, queued.prefer_nvlink) == (
        "best-effort",
        ("A100-80G", "H100-80G"),
        True,
    )
    assert read_trace(tmp_path / f"t{suffix}")[1].checkpoint_s == 0


def test_bad_checkpoint_and_unknown_class(tmp_path: Path, cluster: Instance) -> None:
    path = tmp_path / "trace.jsonl"
    message = error_of(
        path, '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 9, "checkpoint_s": -5}\n'
    )
    assert "line 1: checkpoint_s: must be an integer >= 0 (got -5)" in message
    with pytest.raises(ValueError, match="job 'a': priority_class: is not a priority class"):
        simulate([TraceJob("a", 0, 1, duration_s=9, priority_class="urgent")], cluster)


def test_drains_in_a_failure_trace(tmp_path: Path) -> None:
    path = tmp_path / "failures.csv"
    path.write_text("node,at_s,repair_s,gpu,kind\na01,60,600,,drain\nv01,90,60,3,\n", "utf-8")
    drain, failure = read_outages(path)
    assert (drain.kind, drain.gpu, failure.kind) == ("drain", None, "fail")
    path.write_text("node,at_s,repair_s,gpu,kind\na01,60,600,2,drain\n", "utf-8")
    with pytest.raises(InputError, match="line 2: gpu: a drain takes a whole node"):
        read_outages(path)
    path.write_text("node,at_s,repair_s,kind\na01,60,600,reboot\n", "utf-8")
    with pytest.raises(InputError, match="line 2: kind: must be one of fail, drain"):
        read_outages(path)


def test_given_the_cluster_reading_checks_names_with_their_line(
    tmp_path: Path, cluster: Instance
) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("id,submit_s,gpus,duration_s,gpu_types\na,0,1,9,\nb,0,1,9,TPU\n", "utf-8")
    assert len(read_trace(trace)) == 2  # without the cluster, names are not checked
    with pytest.raises(
        InputError, match=r"trace\.csv: line 3: gpu_types\[0\]: is not in gpu_types"
    ):
        read_trace(trace, cluster)
    failures = tmp_path / "failures.csv"
    failures.write_text("node,at_s,repair_s\nnope,0,10\n", "utf-8")
    assert len(read_outages(failures)) == 1
    with pytest.raises(InputError, match=r"failures\.csv: line 2: node: names no node"):
        read_outages(failures, cluster)
