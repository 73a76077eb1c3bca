"""Recorded squeue/sinfo documents -> whale_opt Instance."""

from __future__ import annotations

import copy

import pytest

from whale_opt.problem_data import GpuType, Policy
from whale_opt.slurm import BridgeOptions, SlurmDataError, build_snapshot, parse_jobs, parse_nodes

from .conftest import Recorded

INDEXED = BridgeOptions(gres_mode="indexed", gpu_types={"a100": GpuType("a100", 80.0)})


def test_nodes_plain(plain: Recorded) -> None:
    instance = build_snapshot(plain.squeue, plain.sinfo, plain.now).instance
    shapes = [(n.id, n.gpu_type, n.gpu_count, n.down) for n in instance.nodes]
    assert shapes == [
        ("n1", "a100", 8, False),
        ("n2", "a100", 8, False),
        ("n3", "a100", 8, False),
        ("n4", "a100", 8, True),  # scontrol update State=DOWN
    ]
    assert set(instance.gpu_types) == {"a100"}


def test_running_jobs_hold_their_gres_detail_indices(plain: Recorded) -> None:
    snapshot = build_snapshot(plain.squeue, plain.sinfo, plain.now)
    held = {job.id: job.gpu_ids for job in snapshot.instance.running}
    assert held["1"] == ("n1/0", "n1/1", "n1/2")
    assert held["2"] == ("n1/3", "n1/4")
    assert held["3"] == tuple(f"n{n}/{k}" for n in (2, 3) for k in range(8))


def test_a_released_job_not_started_yet_holds_the_free_gpus(plain: Recorded) -> None:
    snapshot = build_snapshot(plain.squeue, plain.sinfo, plain.now)
    assert snapshot.in_flight == ("4",)
    job = snapshot.instance.running[snapshot.instance.running_index["4"]]
    assert job.gpu_ids == ("n1/5", "n1/6", "n1/7")  # 3 of its 4: Slurm starts it later
    assert not job.preemptible


def test_held_jobs_become_the_queue(plain: Recorded) -> None:
    snapshot = build_snapshot(plain.squeue, plain.sinfo, plain.now)
    queue = {job.id: job for job in snapshot.instance.queue}
    assert set(queue) == {"5", "6", "7"}
    assert (queue["5"].gpu_count, queue["5"].gpu_types, queue["5"].duration_s) == (
        1,
        ("a100",),
        300,
    )
    assert (queue["6"].gpu_count, queue["6"].topology, queue["6"].duration_s) == (8, "node", 3600)
    assert queue["7"].duration_s == 3600  # no time limit: the default estimate
    assert all(job.submitted_at <= 0 for job in queue.values())


def test_remaining_time_counts_from_the_start(plain: Recorded) -> None:
    snapshot = build_snapshot(plain.squeue, plain.sinfo, plain.now + 100)
    job = snapshot.instance.running[snapshot.instance.running_index["1"]]
    start = snapshot.jobs["1"].start_time
    assert job.remaining_s == 600 - (plain.now + 100 - start)
    assert job.started_at == start - plain.now - 100


def test_indexed_layout(indexed: Recorded) -> None:
    snapshot = build_snapshot(indexed.squeue, indexed.sinfo, indexed.now, INDEXED)
    instance = snapshot.instance
    assert [(n.id, n.gpu_type, n.gpu_count, n.draining) for n in instance.nodes] == [
        ("n1", "a100", 8, False),
        ("n2", "a100", 8, True),  # DRAIN flag
        ("n3", "a100", 8, False),
        ("n4", "a100", 8, False),
    ]
    held = {job.id: job.gpu_ids for job in instance.running}
    assert held["2"] == ("n1/2", "n1/5")
    assert len(held["3"]) == 16
    # Job 6 was released to n1 asking g2, which job 2 holds: nothing of its own yet.
    assert "6" not in held and snapshot.in_flight == ()
    # The CPU-only job on n2 takes its 2 CPUs off the node.
    assert instance.nodes[instance.node_index["n2"]].cpu == 14.0


def test_indexed_queue_and_skipped(indexed: Recorded) -> None:
    snapshot = build_snapshot(indexed.squeue, indexed.sinfo, indexed.now, INDEXED)
    queue = {job.id: job for job in snapshot.instance.queue}
    assert set(queue) == {"4", "7", "8", "9"}
    assert queue["4"].gpu_count == 1  # requeued by requeuehold: held again, typed g0
    assert queue["8"].gpu_types == ("a100",)  # -C a100: a feature names the model
    assert (queue["9"].gpu_count, queue["9"].topology) == (16, "nvlink")  # 2 whole nodes
    skipped = dict(snapshot.skipped)
    assert set(skipped) == {"10", "11", "12"}
    assert "dependency" in skipped["10"]
    assert "--gpus" in skipped["11"]
    assert "array" in skipped["12"]


def test_indexed_mode_leaves_plain_nodes_out(plain: Recorded) -> None:
    snapshot = build_snapshot(
        plain.squeue, plain.sinfo, plain.now, BridgeOptions(gres_mode="indexed")
    )
    assert snapshot.instance.nodes == () and snapshot.instance.running == ()


def test_preemptible_only_when_allowed(plain: Recorded) -> None:
    off = build_snapshot(plain.squeue, plain.sinfo, plain.now).instance
    on = build_snapshot(
        plain.squeue, plain.sinfo, plain.now, BridgeOptions(allow_preemption=True)
    ).instance
    assert not off.policy.allow_preemption and not any(j.preemptible for j in off.running)
    assert on.policy.allow_preemption
    assert {j.id for j in on.running if j.preemptible} == {"1", "2", "3"}


def test_partition_filter(plain: Recorded) -> None:
    other = BridgeOptions(partition="cpu")
    snapshot = build_snapshot(plain.squeue, plain.sinfo, plain.now, other)
    assert snapshot.instance.nodes == () and snapshot.instance.queue == ()


def test_multi_node_job_must_ask_whole_nodes(indexed: Recorded) -> None:
    squeue = copy.deepcopy(indexed.squeue)
    for record in squeue["jobs"]:
        if record["job_id"] == 9:
            record["tres_per_node"] = "gres:gpu:4"
    snapshot = build_snapshot(squeue, indexed.sinfo, indexed.now, INDEXED)
    assert "whole nodes" in dict(snapshot.skipped)["9"]


def test_priority_class_from_comment(plain: Recorded) -> None:
    squeue = copy.deepcopy(plain.squeue)
    for record in squeue["jobs"]:
        if record["job_id"] == 5:
            record["comment"] = "class=online"
    queue = build_snapshot(squeue, plain.sinfo, plain.now).instance.queue
    assert {job.id: job.priority_class for job in queue}["5"] == "online"


def test_documents_with_errors_are_refused(plain: Recorded) -> None:
    broken = {**plain.squeue, "errors": [{"error": "boom"}]}
    with pytest.raises(SlurmDataError, match="errors"):
        parse_jobs(broken)
    with pytest.raises(SlurmDataError, match="'nodes'"):
        parse_nodes({"meta": {}})
    bad = copy.deepcopy(plain.sinfo)
    bad["nodes"][0]["gres"] = "gpu:a100:x"
    with pytest.raises(SlurmDataError, match="node n1"):
        parse_nodes(bad)


def test_indexed_mode_leaves_a_typed_model_request_held(indexed: Recorded) -> None:
    squeue = copy.deepcopy(indexed.squeue)
    for record in squeue["jobs"]:
        if record["job_id"] == 7:
            record["tres_per_node"] = "gres:gpu:a100:4"
    snapshot = build_snapshot(squeue, indexed.sinfo, indexed.now, INDEXED)
    assert dict(snapshot.skipped)["7"] == (
        "asks gpu:a100:N; with indexed GRES ask --gres=gpu:N -C a100"
    )


def test_a_released_job_slurm_cannot_start_holds_nothing(plain: Recorded) -> None:
    squeue = copy.deepcopy(plain.squeue)
    for record in squeue["jobs"]:
        if record["job_id"] == 4:
            record["state_reason"] = "BadConstraints"
    snapshot = build_snapshot(squeue, plain.sinfo, plain.now)
    assert snapshot.in_flight == () and "4" not in snapshot.instance.running_index


def test_an_operator_hold_keeps_a_job_away(plain: Recorded) -> None:
    squeue = copy.deepcopy(plain.squeue)
    for record in squeue["jobs"]:
        if record["job_id"] == 6:
            record["state_reason"] = "JobHeldAdmin"  # scontrol hold, as root
    queue = build_snapshot(squeue, plain.sinfo, plain.now).instance.queue
    assert {job.id for job in queue} == {"5", "7"}


def test_prices_of_types_the_partition_lacks_are_left_out(plain: Recorded) -> None:
    policy = Policy(gpu_second_prices={"a100": 0.5, "h100": 2.0})
    instance = build_snapshot(plain.squeue, plain.sinfo, plain.now, policy=policy).instance
    assert instance.policy.gpu_second_prices == (("a100", 0.5),)
