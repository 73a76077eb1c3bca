"""Gavel durations by GPU type, the assumptions file, and the import CLI."""

from __future__ import annotations

import csv
import errno
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from whale_opt.cli import main
from whale_opt.convert import (
    gavel_durations,
    load_assumptions,
    read_gavel,
    read_openb_cluster,
    read_philly_cluster,
    read_philly_trace,
    with_gavel_speeds,
)
from whale_opt.generate import GPU_TYPES
from whale_opt.io import InputError, read_instance, write_instance
from whale_opt.sim import TraceJob, read_trace

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
RESNET = "ResNet-50 (batch size 64)"


def test_gavel_measured_and_extrapolated() -> None:
    table = read_gavel(TRACES / "gavel_throughputs.json")
    types = {**read_philly_cluster(TRACES / "philly_machines.csv")[0].gpu_types}
    types["V100-32G"], types["A100-80G"] = GPU_TYPES["V100-32G"], GPU_TYPES["A100-80G"]
    out = gavel_durations(table, RESNET, 3600, types)
    # measured: K80 0.619, P100 (for P40) 2.619, V100 4.395 steps/s; V100 speed 0.45
    assert out["V100-32G"] == 8000 and out["A100-80G"] == 3600
    assert out["K80-12G"] == pytest.approx(3600 * 4.395 / 0.45 / 0.619, rel=1e-3)
    assert out["P40-24G"] == pytest.approx(3600 * 4.395 / 0.45 / 2.619, rel=1e-3)


def test_with_gavel_speeds_is_seeded_and_reads_back(tmp_path: Path) -> None:
    table = read_gavel(TRACES / "gavel_throughputs.json")
    cluster, _ = read_philly_cluster(TRACES / "philly_machines.csv")
    jobs, _ = read_philly_trace(TRACES / "philly_jobs.json")
    first, classes = with_gavel_speeds(jobs, table, 3, cluster.gpu_types)
    again, same = with_gavel_speeds(jobs, table, 3, cluster.gpu_types)
    assert first == again and classes == same
    assert all(dict(job.duration_by_type_s).keys() == {"K80-12G", "P40-24G"} for job in first)
    from whale_opt.sim import write_trace

    write_trace(tmp_path / "g.jsonl", first)
    assert read_trace(tmp_path / "g.jsonl") == first


def test_gavel_malformed() -> None:
    with pytest.raises(InputError, match=r"p100\.\('ResNet-50 \(batch size 64\)', 1\)\.null"):
        read_gavel(TRACES / "bad_gavel_throughputs.json")


@pytest.mark.parametrize(
    "v100",
    [
        {},
        {"('ResNet-50 (batch size 64)', 1)": {"null": 0}, "('LM (batch size 20)', 2)": {"null": 3}},
    ],
)
def test_gavel_without_a_class_measured_at_one_worker(tmp_path: Path, v100: object) -> None:
    path = tmp_path / "thr.json"
    path.write_text(json.dumps({"k80": {}, "p100": {}, "v100": v100}))
    with pytest.raises(InputError) as caught:
        read_gavel(path)
    assert str(caught.value) == (
        f'{path}: v100: has no job class measured at 1 worker (a "null" throughput > 0)'
    )


def test_assumptions_override(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text('rack_size = 1\n[gpu_models.G2]\nnvlink = "nvswitch"\n[qos]\nBE = 0.5\n')
    assumptions = load_assumptions(path)
    cluster, _ = read_openb_cluster(TRACES / "openb_nodes.csv", assumptions)
    g2 = [n for n in cluster.nodes if n.gpu_type == "G2-32G"]
    assert {n.nvlink for n in g2} == {"nvswitch"} and len({n.rack for n in g2}) == 2
    assert assumptions.qos_weights["BE"] == 0.5
    path.write_text('[gpu_models.G2]\nnvlink = "mesh"\n')
    with pytest.raises(InputError, match=r"gpu_models\.G2\.nvlink: must be one of"):
        load_assumptions(path)


def test_cli_import_all(tmp_path: Path) -> None:
    runner = CliRunner()
    out = {name: tmp_path / name for name in ("o.json", "o.csv", "p.json", "p.jsonl", "g.jsonl")}
    commands = [
        ["openb", "--nodes", TRACES / "openb_nodes.csv", "--pods", TRACES / "openb_pods.csv",
         "--cluster-out", out["o.json"], "--trace-out", out["o.csv"]],
        ["philly", "--machines", TRACES / "philly_machines.csv", "--jobs",
         TRACES / "philly_jobs.json", "--cluster-out", out["p.json"],
         "--trace-out", out["p.jsonl"]],
        ["pai", "--machines", TRACES / "pai_machine_spec.csv",
         "--cluster-out", tmp_path / "x.json"],
        ["gavel", out["p.jsonl"], "--cluster", out["p.json"], "--throughputs",
         TRACES / "gavel_throughputs.json", "--trace-out", out["g.jsonl"]],
    ]  # fmt: skip
    for args in commands:
        result = runner.invoke(main, ["import", *map(str, args)])
        assert result.exit_code == 0, result.output
    assert "fractional 19" in runner.invoke(main, ["import", *map(str, commands[0])]).output
    read_instance(out["o.json"]), read_trace(out["o.csv"]), read_trace(out["g.jsonl"])


def test_cli_import_bad_row_exits_2(tmp_path: Path) -> None:
    args = ["import", "openb", "--pods", str(TRACES / "bad_openb_pods.csv")]
    result = CliRunner().invoke(main, [*args, "--trace-out", str(tmp_path / "t.csv")])
    assert result.exit_code == 2
    assert "line 4: num_gpu: must be an integer (got 'x')" in result.output


PHILLY = ["import", "philly", "--machines", str(TRACES / "philly_machines.csv")]
PHILLY += ["--jobs", str(TRACES / "philly_jobs.json")]


@pytest.mark.parametrize(
    ("cluster_out", "trace_out", "message"),
    [
        ("p.json", "p.txt", "p.txt: (file): unknown trace format '.txt'; use .csv or .jsonl"),
        ("d.json", "p.csv", "d.json: cannot write: is a directory"),
        ("p.json", "d.csv", "d.csv: cannot write: is a directory"),
        ("p.json", "p.json", "p.json: cannot write the cluster and the trace to one file"),
    ],
)
def test_cli_import_bad_output_writes_nothing(
    tmp_path: Path, cluster_out: str, trace_out: str, message: str
) -> None:
    folders = [tmp_path / "d.json", tmp_path / "d.csv"]
    for folder in folders:
        folder.mkdir()
    outputs = [
        "--cluster-out",
        str(tmp_path / cluster_out),
        "--trace-out",
        str(tmp_path / trace_out),
    ]
    result = CliRunner().invoke(main, [*PHILLY, *outputs])
    assert result.exit_code == 2, result.output
    assert f"error: {tmp_path / message}" in result.output
    assert sorted(tmp_path.iterdir()) == sorted(folders)
    assert not any(any(folder.iterdir()) for folder in folders)


def test_cli_import_failed_write_keeps_old_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(path: Path, jobs: object) -> None:
        Path(path).write_text("half a trace")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("whale_opt.sim.write_trace", disk_full)
    cluster, trace = tmp_path / "p.json", tmp_path / "p.csv"
    cluster.write_text("the old cluster")
    outputs = ["--cluster-out", str(cluster), "--trace-out", str(trace)]
    result = CliRunner().invoke(main, [*PHILLY, *outputs])
    assert result.exit_code == 2, result.output
    assert f"error: {trace}: cannot write: No space left on device" in result.output
    assert cluster.read_text() == "the old cluster"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


SMALL = Path(__file__).resolve().parents[2] / "instances" / "small" / "two-racks-mixed.json"


def _gavel_import(tmp_path: Path, *jobs: dict[str, object]) -> tuple[list[str], Path]:
    """``import gavel`` arguments for ``jobs`` on the small cluster, and its trace out."""
    cluster = tmp_path / "cluster.json"
    write_instance(cluster, read_instance(SMALL).replace(running=(), queue=()))
    trace = tmp_path / "jobs.jsonl"
    trace.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "gavel.jsonl"
    args = ["import", "gavel", str(trace), "--cluster", str(cluster)]
    args += ["--throughputs", str(TRACES / "gavel_throughputs.json"), "--trace-out", str(out)]
    return args, out


def test_gavel_import_then_replay_runs_the_actual_duration(tmp_path: Path) -> None:
    # On A100 (speed 1.0, no Gavel worker) the class changes nothing; on V100 (the
    # class's measured throughput) every class runs reference / the V100 speed.
    both = {"submit_s": 0, "gpus": 1, "duration_s": 3600, "actual_duration_s": 4000}
    args, out = _gavel_import(
        tmp_path,
        {"id": "a", **both, "gpu_types": ["A100-80G"]},
        {"id": "v", **both, "gpu_types": ["V100-32G"]},
    )
    runner = CliRunner()
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    by_type = {job.id: dict(job.duration_by_type_s) for job in read_trace(out)}
    assert by_type == {"a": {"A100-80G": 3600}, "v": {"V100-32G": 8000}}  # estimates
    results = tmp_path / "results"
    cluster = args[args.index("--cluster") + 1]
    result = runner.invoke(main, ["simulate", str(out), "--cluster", cluster, "-o", str(results)])
    assert result.exit_code == 0, result.output
    with (results / "wspt-jobs.csv").open() as rows:
        ran = {row["id"]: float(row["isolated_s"]) for row in csv.DictReader(rows)}
    # The actual/estimate ratio counts once: 4000 s at speed 1.0 (it was 4444).
    assert ran["a"] == 4000
    assert ran["v"] == pytest.approx(4000 / 0.45)


def test_gavel_keeps_durations_the_trace_gives_by_type(tmp_path: Path) -> None:
    table = read_gavel(TRACES / "gavel_throughputs.json")
    types = read_instance(SMALL).gpu_types
    given = TraceJob("e", 0, 1, duration_by_type_s=(("A100-80G", 900),))
    mixed = TraceJob("m", 0, 1, duration_s=3600, duration_by_type_s=(("H100-80G", 1000),))
    jobs, classes = with_gavel_speeds([given, mixed], table, 0, types)
    assert jobs[0] == given and "e" not in classes
    assert dict(jobs[1].duration_by_type_s) == {
        "A100-80G": 3600,
        "H100-80G": 1000,  # the trace's, not the class's 1800
        "V100-32G": 8000,
    }
    args, out = _gavel_import(tmp_path, {"id": "e", "submit_s": 0, "gpus": 1,
                                         "duration_by_type_s": {"A100-80G": 900}})  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "classes 0  types 3  kept as given 1" in result.output
    assert read_trace(out) == (given,)


def test_gavel_import_onto_its_own_trace_exits_2_and_keeps_it(tmp_path: Path) -> None:
    args, _ = _gavel_import(tmp_path, {"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60})
    trace = Path(args[2])
    before = trace.read_text()
    result = CliRunner().invoke(main, [*args, "--trace-out", str(trace)])
    assert result.exit_code == 2, result.output
    assert (
        result.stderr
        == f"error: {trace}: cannot write: is the input file {trace}; give another path\n"
    )
    assert trace.read_text() == before


def test_cli_import_into_an_empty_path_exits_2() -> None:
    result = CliRunner().invoke(main, [*PHILLY, "--cluster-out", ""])
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --cluster-out: is empty: give a path to write (got '')\n"
