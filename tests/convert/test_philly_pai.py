"""Philly machine list and job subset, PAI machine spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.convert import (
    DEFAULT_ASSUMPTIONS,
    read_pai_cluster,
    read_philly_cluster,
    read_philly_trace,
)
from whale_opt.io import InputError, read_instance, write_instance
from whale_opt.sim import SimConfig, read_trace, simulate, write_trace

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"


def test_philly_cluster_by_gpu_memory() -> None:
    cluster, report = read_philly_cluster(TRACES / "philly_machines.csv")
    assert (report.nodes, report.gpus) == (20, 12 * 2 + 8 * 8)
    m0 = cluster.nodes[cluster.node_index["m0"]]
    assert (m0.gpu_count, m0.gpu_type, cluster.gpu_types["K80-12G"].memory_gb) == (2, "K80-12G", 12)
    assert {n.gpu_type for n in cluster.nodes if n.gpu_count == 8} == {"P40-24G"}


def test_philly_trace_and_replay(tmp_path: Path) -> None:
    jobs, report = read_philly_trace(TRACES / "philly_jobs.json")
    assert report.jobs == len(jobs) == 42 and report.multi_node == 2
    assert min(job.submit_s for job in jobs) == 0
    assert {job.topology for job in jobs if job.gpus > 8} == {"rack"}
    speed = DEFAULT_ASSUMPTIONS.model("philly-24GB").speed
    first = jobs[0]  # 4 attempts, 4 attempts: 2,240,194 s of run time in all
    assert (first.id, first.gpus, first.submit_s) == ("application_1504131676014_2141", 8, 0)
    assert first.actual_duration_s == pytest.approx(2_240_194 * speed, abs=1)
    write_trace(tmp_path / "jobs.jsonl", jobs)
    assert read_trace(tmp_path / "jobs.jsonl") == jobs
    cluster, _ = read_philly_cluster(TRACES / "philly_machines.csv")
    write_instance(tmp_path / "cluster.json", cluster)
    result = simulate(jobs, read_instance(tmp_path / "cluster.json"), SimConfig(seed=1))
    assert (result.jobs["status"] == "completed").all()


def test_philly_malformed_job() -> None:
    with pytest.raises(InputError, match=r"bad_philly_jobs.json: \[2\].num_gpus: must be an "):
        read_philly_trace(TRACES / "bad_philly_jobs.json")


def test_pai_cluster(tmp_path: Path) -> None:
    cluster, report = read_pai_cluster(TRACES / "pai_machine_spec.csv")
    assert report.cpu_only_skipped == 16 and report.nodes == 12
    assert report.by_model == {"T4": 3, "MISC": 3, "V100M32": 3, "V100": 3}
    v100 = next(n for n in cluster.nodes if n.gpu_type == "V100-32G")
    assert (v100.gpu_count, v100.cpu, v100.memory_gb, v100.nvlink) == (
        8,
        96,
        384,
        "hybrid-cube-mesh",
    )
    write_instance(tmp_path / "pai.json", cluster)
    assert read_instance(tmp_path / "pai.json").nodes == cluster.nodes


def test_pai_malformed_row() -> None:
    with pytest.raises(InputError) as caught:
        read_pai_cluster(TRACES / "bad_pai_machine_spec.csv")
    assert str(caught.value).endswith("line 5: cap_gpu: must be an integer (got 'eight')")
