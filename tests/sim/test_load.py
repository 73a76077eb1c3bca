"""Offered load and arrival compression (whale_opt.sim.load)."""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim.load import (
    at_load,
    capacity,
    compress_arrivals,
    offered_load,
    sample_nodes,
    work_s,
)
from whale_opt.sim.trace import TraceJob


def two_speed_cluster() -> Instance:
    types = {"fast": GpuType("fast", 80, speed=2.0), "slow": GpuType("slow", 80, speed=1.0)}
    nodes = (Node("f0", "fast", 4), Node("s0", "slow", 4), Node("s1", "slow", 4, down=True))
    return Instance("two-speed", types, nodes)


def test_capacity_counts_healthy_gpus_and_their_mean_speed() -> None:
    assert capacity(two_speed_cluster()) == (8, 1.5)


def test_offered_load_is_work_over_capacity_in_the_arrival_window() -> None:
    trace = (
        TraceJob("a", 0, 2, actual_duration_s=3000),
        TraceJob("b", 1000, 4, duration_s=1500),  # no actual: the estimate counts
    )
    # work 2 x 3000 + 4 x 1500 = 12,000 GPU-s at speed 1 -> 8,000 at mean speed 1.5,
    # over 8 GPUs x 1,000 s.
    assert offered_load(trace, two_speed_cluster()) == pytest.approx(1.0)


def test_compression_keeps_order_and_relative_spacing() -> None:
    trace = tuple(TraceJob(f"j{k}", 500 + 100 * k, 1, duration_s=60) for k in range(5))
    squeezed = compress_arrivals(trace, 4.0)
    assert [job.submit_s for job in squeezed] == [0, 25, 50, 75, 100]
    assert [job.id for job in squeezed] == [job.id for job in trace]
    assert all(
        a.gpus == b.gpus and a.duration_s == b.duration_s
        for a, b in zip(trace, squeezed, strict=True)
    )


def test_at_load_hits_the_asked_load() -> None:
    cluster = two_speed_cluster()
    trace = tuple(TraceJob(f"j{k}", 3600 * k, 1, actual_duration_s=600) for k in range(50))
    assert offered_load(trace, cluster) < 0.05
    loaded, factor = at_load(trace, cluster, 0.8)
    assert factor > 1
    assert offered_load(loaded, cluster) == pytest.approx(0.8, rel=0.01)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_nonpositive_factor_or_load_is_refused(bad: float) -> None:
    trace = (TraceJob("a", 0, 1, duration_s=60), TraceJob("b", 10, 1, duration_s=60))
    with pytest.raises(ValueError, match="> 0"):
        compress_arrivals(trace, bad)
    with pytest.raises(ValueError, match="> 0"):
        at_load(trace, two_speed_cluster(), bad)


def test_load_of_simultaneous_arrivals_is_refused() -> None:
    trace = (TraceJob("a", 5, 1, duration_s=60), TraceJob("b", 5, 1, duration_s=60))
    with pytest.raises(ValueError, match="at once"):
        offered_load(trace, two_speed_cluster())


def test_sample_nodes_keeps_each_type_and_its_largest_node() -> None:
    nodes = tuple(
        Node(f"{t}{k}", t, 8 if k == 3 else 4) for t in ("A100", "V100") for k in range(10)
    )
    cluster = Instance("c", {t: GpuType(t, 40) for t in ("A100", "V100")}, nodes, (), ())
    half = sample_nodes(cluster, 0.5, seed=1)
    by_type = {t: [n for n in half.nodes if n.gpu_type == t] for t in ("A100", "V100")}
    assert all(len(members) == 5 for members in by_type.values())
    assert all(any(n.gpu_count == 8 for n in members) for members in by_type.values())
    assert sample_nodes(cluster, 0.5, seed=1).nodes == half.nodes  # seeded
    assert len(sample_nodes(cluster, 0.01).nodes) == 2  # at least one of each type


def test_a_share_offers_its_fraction_of_a_gpu() -> None:
    whole = TraceJob("a", 0, 1, actual_duration_s=100)
    share = TraceJob("b", 0, 1, actual_duration_s=100, gpu_milli=250)
    assert work_s(whole) == 100 and work_s(share) == 25


def test_sample_nodes_can_rack_the_sample_anew() -> None:
    nodes = tuple(Node(f"a{k}", "A100", 8, rack=f"r{k}") for k in range(10))
    cluster = Instance("c", {"A100": GpuType("A100", 40)}, nodes, (), ())
    racked = sample_nodes(cluster, 0.6, seed=2, rack_size=4)
    assert [n.rack for n in racked.nodes] == ["A100-r000"] * 4 + ["A100-r001"] * 2
