"""``whale-opt simulate`` end to end on a tiny trace."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from whale_opt.cli import main
from whale_opt.io import write_instance
from whale_opt.problem_data import GpuType, Instance, Node, Policy
from whale_opt.sim import TraceJob, synthetic_trace, write_trace
from whale_opt.sim.synthetic import tenant_cluster, tenant_trace

SMALL = Path(__file__).resolve().parents[2] / "instances" / "small" / "two-racks-mixed.json"


def test_simulate_writes_summary_tables_and_plots(tmp_path: Path, cluster: Instance) -> None:
    write_instance(tmp_path / "cluster.json", cluster)
    write_trace(tmp_path / "trace.csv", synthetic_trace(20, cluster, seed=7))
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(tmp_path / "trace.csv"),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "--policy",
            "wspt",
            "--policy",
            "greedy",
            "--mtbf",
            "500000",
            "--noise",
            "0.3",
            "--check",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "avg_jct_s" in result.stdout and "wspt" in result.stdout
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert list(summary.columns) == ["wspt", "greedy"]
    assert summary.loc["completed", "wspt"] == 20
    for name in ("queue.png", "utilisation.png", "jct_cdf.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG")
    jobs = pd.read_csv(out / "wspt-jobs.csv")
    assert len(jobs) == 20 and set(jobs["status"]) == {"completed"}


def test_simulate_bad_trace_is_one_line(tmp_path: Path, cluster: Instance) -> None:
    write_instance(tmp_path / "cluster.json", cluster)
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60}\n{"id": \n')
    result = CliRunner().invoke(
        main, ["simulate", str(trace), "--cluster", str(tmp_path / "cluster.json")]
    )
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {trace}: line 2 column 8: malformed JSON: Expecting value (got end of line)"
    ]


def test_simulate_trace_type_missing_from_cluster(tmp_path: Path, cluster: Instance) -> None:
    write_instance(tmp_path / "cluster.json", cluster)
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        '{"id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60, "gpu_types": ["TPU"]}\n'
    )
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(trace),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {trace}: line 1: gpu_types[0]: is not in gpu_types (a typo?); the types"
        " are H100-80G, A100-80G, V100-32G (got 'TPU')"
    ]


def _given(tmp_path: Path, cluster: Instance) -> list[str]:
    """A three-job trace and ``cluster`` written to ``tmp_path``: simulate's arguments."""
    write_instance(tmp_path / "cluster.json", cluster)
    write_trace(tmp_path / "trace.csv", synthetic_trace(3, cluster, seed=1))
    return [str(tmp_path / "trace.csv"), "--cluster", str(tmp_path / "cluster.json")]


def _simulate(tmp_path: Path, *args: str) -> tuple[int, str]:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", *args, "-o", str(out)])
    assert not out.exists()  # nothing written
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpu_types", ["H100-80GB"], "line 2: gpu_types[0]: is not in gpu_types"),
        ("preferred_gpu_types", ["B200"], "line 2: preferred_gpu_types[0]: is not in gpu_types"),
        ("duration_by_type_s", {"TPU": 9}, "line 2: duration_by_type_s: is not in gpu_types"),
        ("priority_class", "urgent", "line 2: priority_class: is not a priority class"),
    ],
)
def test_simulate_trace_names_checked_before_any_replay(
    tmp_path: Path, cluster: Instance, field: str, value: object, message: str
) -> None:
    """Before: `error: job 'j1' names GPU types ...`, no file or line, after a bar started."""
    import json

    write_instance(tmp_path / "cluster.json", cluster)
    trace = tmp_path / "trace.jsonl"
    good = {"id": "j0", "submit_s": 0, "gpus": 1, "duration_s": 60}
    trace.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "j1", field: value}))
    code, err = _simulate(tmp_path, str(trace), "--cluster", str(tmp_path / "cluster.json"))
    assert code == 2 and err.startswith(f"error: {trace}: {message}")
    assert "job/s" not in err and "%" not in err  # no progress bar began


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("zz,5,100,", "line 3: node: names no node of the cluster (got 'zz')"),
        ("h01,5,100,8", "line 3: gpu: is out of range: node 'h01' has 8 GPUs (got 8)"),
    ],
)
def test_simulate_failure_trace_names_file_and_line(
    tmp_path: Path, cluster: Instance, row: str, message: str
) -> None:
    """Before: `error: outage names unknown node 'zz'`, no file or line."""
    failures = tmp_path / "failures.csv"
    failures.write_text(f"node,at_s,repair_s,gpu\nh01,0,100,\n{row}\n", "utf-8")
    code, err = _simulate(tmp_path, *_given(tmp_path, cluster), "--failures", str(failures))
    assert code == 2 and err.strip().splitlines() == [f"error: {failures}: {message}"]


def test_simulate_cluster_with_jobs_names_the_cluster_file(
    tmp_path: Path, cluster: Instance
) -> None:
    """Before: `error: cluster 'two-racks-mixed' has queued or running jobs`, no path."""
    write_trace(tmp_path / "trace.csv", synthetic_trace(3, cluster, seed=1))
    code, err = _simulate(tmp_path, str(tmp_path / "trace.csv"), "--cluster", str(SMALL))
    assert code == 2 and err.strip().splitlines() == [
        f"error: {SMALL}: running: must be empty: a cluster for simulate brings no jobs"
        ' (the trace does) (got ["r1", "r2", "r3"])'
    ]


def test_simulate_with_classes_drains_and_preemption(tmp_path: Path) -> None:
    cluster = tenant_cluster(32, seed=1, allow_preemption=False)
    write_instance(tmp_path / "cluster.json", cluster)
    write_trace(tmp_path / "trace.jsonl", tenant_trace(25, cluster, load=1.2, seed=3))
    drained = cluster.nodes[0].id
    (tmp_path / "failures.csv").write_text(
        f"node,at_s,repair_s,kind\n{drained},0,3600,drain\n", "utf-8"
    )
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(tmp_path / "trace.jsonl"),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "--failures",
            str(tmp_path / "failures.csv"),
            "--preemption",
            "--aging",
            "0.5",
            "--check",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "lost_jobs" in result.stdout and "by priority class and tenant" in result.stdout
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert summary.loc["lost_jobs", "wspt"] == 0 and summary.loc["completed", "wspt"] == 25
    groups = pd.read_csv(out / "wspt-groups.csv", index_col="group")
    assert set(groups.index) >= {f"tenant:{name}" for name in cluster.tenants}
    segments = pd.read_csv(out / "wspt-segments.csv")
    on_drained = segments["gpus"].str.startswith(f"{drained}/")
    assert not (on_drained & (segments["start_s"] < 3600)).any()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--aging", "-1"),
        ("--checkpoint", "-1"),
        ("--round-period", "-5"),
        ("--batch", "-1"),
        ("--repair", "-3"),
        ("--mtbf", "-1"),
        ("--noise", "-1"),
    ],
)
def test_simulate_bad_option_names_the_option(
    tmp_path: Path, cluster: Instance, option: str, value: str
) -> None:
    # Not the replay's field behind it (checkpoint_interval_s: must be >= 1, where
    # --checkpoint takes 0 for never).
    code, err = _simulate(tmp_path, *_given(tmp_path, cluster), option, value)
    assert code == 2
    assert option in err and "_s:" not in err


def _waiting_pair(tmp_path: Path) -> list[str]:
    """One GPU busy until 5,000 s; L (3,000 s) has waited since 1 s, S (100 s) since 4,990 s."""
    types = {"g": GpuType("g", 80)}
    cluster = Instance("one", types, (Node("n0", "g", 1),), policy=Policy(aging_per_hour=0))
    write_instance(tmp_path / "cluster.json", cluster)
    trace = (
        TraceJob("first", 0, 1, duration_s=5_000),
        TraceJob("L", 1, 1, duration_s=3_000),
        TraceJob("S", 4_990, 1, duration_s=100),
    )
    write_trace(tmp_path / "trace.csv", trace)
    return ["simulate", str(tmp_path / "trace.csv"), "--cluster", str(tmp_path / "cluster.json")]


def _started(out: Path) -> dict[str, float]:
    jobs = pd.read_csv(out / "wspt-jobs.csv")
    return dict(zip(jobs["id"], jobs["first_start_s"], strict=True))


def test_max_wait_sets_the_replays_wait_ceiling(tmp_path: Path) -> None:
    arguments = _waiting_pair(tmp_path)
    runs = {}
    for ceiling in ("60", "none"):
        out = tmp_path / ceiling
        result = CliRunner().invoke(main, [*arguments, "--max-wait", ceiling, "--check", "-o", out])
        assert result.exit_code == 0, result.output
        runs[ceiling] = _started(out)
    assert runs["60"]["L"] == 5_000  # overdue: ahead of Smith's order
    assert runs["none"]["S"] == 5_000  # Smith's order: the short job first


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "'soon' is neither whole seconds nor 'none'"),
        ("-5", "error: --max-wait:"),
    ],
)
def test_a_bad_max_wait_is_one_line(tmp_path: Path, value: str, message: str) -> None:
    result = CliRunner().invoke(main, [*_waiting_pair(tmp_path), "--max-wait", value])
    assert result.exit_code == 2
    assert message in result.stderr


def test_floor_bounds_every_policy_and_is_written(tmp_path: Path, cluster: Instance) -> None:
    write_instance(tmp_path / "cluster.json", cluster)
    write_trace(tmp_path / "trace.csv", synthetic_trace(30, cluster, load=1.5, seed=3))
    out = tmp_path / "results"
    arguments = [str(tmp_path / "trace.csv"), "--cluster", str(tmp_path / "cluster.json")]
    policies = ["--policy", "wspt", "--policy", "fifo", "--noise", "0.3", "--floor", "-o", out]
    result = CliRunner().invoke(main, ["simulate", *arguments, *policies])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    floor = float(summary.loc["floor_weighted_jct_s", "wspt"])
    for policy in ("wspt", "fifo"):
        jct = float(summary.loc["weighted_jct_s", policy])
        assert 0 < floor <= jct
        assert f"  {policy}: x{jct / floor:.3f} the floor" in result.stdout
    assert f"floor: {floor:,.0f} s weighted JCT" in result.stdout
