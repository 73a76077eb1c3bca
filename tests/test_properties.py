"""Properties of generated instances: the greedy is valid, bounded, and files round-trip."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.decision import Action, Decision
from whale_opt.io import (
    decision_from_dict,
    decision_to_dict,
    instance_from_dict,
    instance_to_dict,
    read_instance,
    write_instance,
)
from whale_opt.options import SolveOptions
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob
from whale_opt.registry import get_policy
from whale_opt.rules import preemptible_now
from whale_opt.testing import gpu_types, instances, nodes, nvlink_layouts
from whale_opt.topology import nvlink_edges

FAST = settings(max_examples=60, deadline=None)


def _json(payload: object) -> object:
    """Through real JSON text, as a file would carry it."""
    return json.loads(json.dumps(payload))


@FAST
@given(instances())
def test_generated_instances_survive_their_own_validation(instance: Instance) -> None:
    # Building again from the records re-runs every cross-reference check.
    assert instance.replace() == instance
    assert len(instance.nodes) <= 6 and len(instance.queue) <= 8


@FAST
@given(instances())
def test_wspt_decision_passes_the_checker(instance: Instance) -> None:
    decision = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []


@FAST
@given(instances())
def test_wspt_bound_is_below_its_objective(instance: Instance) -> None:
    decision = get_policy("wspt").decide(instance)
    assert decision.bound <= decision.objective * (1 + 1e-9) + 1e-6
    assert 0.0 <= decision.gap <= 1.0


@FAST
@given(instances())
def test_every_job_appears_exactly_once(instance: Instance) -> None:
    decision = get_policy("wspt").decide(instance)
    counts = Counter(item.id for item in decision.jobs)
    assert counts == Counter(job.id for job in (*instance.queue, *instance.running))
    for job in instance.queue:
        assert decision.job(job.id).action in (Action.START, Action.PLANNED, Action.DEFERRED)
    for r, running in enumerate(instance.running):
        may_go = preemptible_now(instance, r)  # wspt preempts for a higher class
        allowed = (Action.KEEP, Action.PREEMPT) if may_go else (Action.KEEP,)
        assert decision.job(running.id).action in allowed


@FAST
@given(instances())
def test_instance_round_trips_through_json(instance: Instance) -> None:
    assert instance_from_dict(_json(instance_to_dict(instance))) == instance
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "instance.json"
        write_instance(path, instance)
        assert read_instance(path) == instance


@FAST
@given(instances())
def test_decision_round_trips_through_json(instance: Instance) -> None:
    decision = get_policy("wspt").decide(instance)
    again = decision_from_dict(_json(decision_to_dict(decision)))
    # The file keeps wall_s to 0.1 ms; everything else is exact.
    assert again == decision.with_changes(wall_s=round(decision.wall_s, 4))
    assert isinstance(again, Decision) and again.gap == decision.gap


@settings(max_examples=30, deadline=None)
@given(gpu_types(), st.data())
def test_nodes_strategy_respects_its_arguments(
    types: dict[str, object], data: st.DataObject
) -> None:
    cluster = data.draw(nodes(list(types), min_nodes=2, max_nodes=4, zones=(), with_failures=False))
    assert 2 <= len(cluster) <= 4
    assert len({node.id for node in cluster}) == len(cluster)
    for node in cluster:
        assert node.gpu_type in types
        assert node.zone is None and not node.down and not node.failed_gpus


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 2, 3, 4, 6, 8, 16]), st.data())
def test_nvlink_layouts_are_valid_for_their_size(gpus: int, data: st.DataObject) -> None:
    layout = data.draw(nvlink_layouts(gpus))
    for a, b in nvlink_edges(layout, gpus):
        assert 0 <= a < b < gpus


# -- reproducers of bugs found by these properties -----------------------------------------


def test_cpsat_never_starts_a_job_on_no_gpus() -> None:
    types = {"A": GpuType("A", 80, 1.0)}
    inst = Instance(
        "cpsat-zero-gang",
        types,
        (Node("a", "A", 1), Node("b", "A", 3, "nvswitch")),
        queue=(QueuedJob("q0", 2, 1), QueuedJob("q1", 2, 1)),
    )
    decision = get_policy("cpsat").decide(inst, SolveOptions(time_limit_s=1.0))
    assert check(inst, decision) == []
