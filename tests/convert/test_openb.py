"""openb (Alibaba GPU v2023): node list -> cluster, pod list -> trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from whale_opt.convert import DEFAULT_ASSUMPTIONS, read_openb_cluster, read_openb_trace
from whale_opt.io import InputError, read_instance, write_instance
from whale_opt.sim import SimConfig, read_trace, simulate, write_trace

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
NODES = TRACES / "openb_nodes.csv"
PODS = TRACES / "openb_pods.csv"


def test_cluster_maps_models_cpu_memory_racks() -> None:
    cluster, report = read_openb_cluster(NODES)
    assert report.cpu_only_skipped == 3
    assert report.nodes == 14 and report.by_model["G2"] == 2
    g2 = cluster.nodes[cluster.node_index["openb-node-0234"]]
    assert (g2.gpu_type, g2.gpu_count, g2.cpu, g2.memory_gb) == ("G2-32G", 8, 96.0, 384.0)
    v100 = [n for n in cluster.nodes if n.gpu_type == "V100-32G"]
    assert {n.nvlink for n in v100 if n.gpu_count == 8} == {"hybrid-cube-mesh"}
    assert {n.nvlink for n in v100 if n.gpu_count != 8} <= {"pcie"}
    assert cluster.gpu_types["T4-16G"].memory_gb == 16
    assert all(n.rack.startswith(n.gpu_type) for n in cluster.nodes)


def test_trace_counts_and_fields() -> None:
    jobs, report = read_openb_trace(PODS)
    assert (report.rows, report.cpu_only, report.pending_skipped) == (64, 5, 2)
    assert report.fractional == 19 and report.cpu_only_skipped == 0
    assert report.jobs == len(jobs) == 64 - 2
    # Shares and CPU-only pods are kept as they are.
    assert sum(job.gpu_milli < 1000 for job in jobs) == 19
    assert all(job.gpus == 1 for job in jobs if job.gpu_milli < 1000)
    assert sum(job.gpus == 0 for job in jobs) == 5
    first = jobs[0]  # openb-pod-0000: 12000 milli, 16384 MiB, LS, 0 .. 12537496
    speed = DEFAULT_ASSUMPTIONS.model("G2").speed
    assert (first.id, first.submit_s, first.cpu, first.memory_gb) == ("openb-pod-0000", 0, 12, 16)
    assert first.actual_duration_s == pytest.approx(12_537_496 * speed, abs=1)
    assert first.duration_s is None and first.topology == "node"
    assert first.weight == DEFAULT_ASSUMPTIONS.qos_weights["LS"]
    specs = {job.gpu_types for job in jobs if job.gpu_types}
    assert ("V100-16G", "V100-32G") in specs and ("G3-80G",) in specs
    assert max(job.gpus for job in jobs) == 8


def test_whole_gpus_rounds_shares_up_and_drops_cpu_only_pods() -> None:
    jobs, report = read_openb_trace(PODS, whole_gpus=True)
    assert (report.cpu_only_skipped, report.fractional, report.jobs) == (5, 19, 64 - 5 - 2)
    assert all(job.gpu_milli == 1000 and job.gpus >= 1 for job in jobs)


def test_pending_from_creation() -> None:
    jobs, report = read_openb_trace(PODS, pending="creation")
    assert report.pending == 2 and report.pending_skipped == 0
    assert len(jobs) == 64


def test_malformed_row_names_file_line_field() -> None:
    with pytest.raises(InputError) as caught:
        read_openb_trace(TRACES / "bad_openb_pods.csv")
    assert str(caught.value) == (
        f"{TRACES / 'bad_openb_pods.csv'}: line 4: num_gpu: must be an integer (got 'x')"
    )


def test_round_trip_and_replay(tmp_path: Path) -> None:
    cluster, _ = read_openb_cluster(NODES)
    jobs, _ = read_openb_trace(PODS)
    write_instance(tmp_path / "cluster.json", cluster)
    write_trace(tmp_path / "trace.csv", jobs)
    again = read_instance(tmp_path / "cluster.json")
    assert again.nodes == cluster.nodes and dict(again.gpu_types) == dict(cluster.gpu_types)
    trace = read_trace(tmp_path / "trace.csv")
    assert trace == jobs
    config = SimConfig(policy="wspt", round_period_s=None, seed=1, duration_noise_sigma=0.3)
    result = simulate(trace[:50], again, config)
    assert (result.jobs["status"] == "completed").all()
    assert len(result.jobs) == 50
