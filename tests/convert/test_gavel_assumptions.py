"""Gavel durations by GPU type, the assumptions file, and the import CLI."""

from __future__ import annotations

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
from whale_opt.io import InputError, read_instance
from whale_opt.sim import read_trace

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
