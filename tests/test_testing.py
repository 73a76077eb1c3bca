"""The public strategies (whale_opt.testing): the keywords they promise hold, every
feature of priority and preemption shows up, what they build is valid and round-trips,
and the greedy's decision on it passes the checker."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, target
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from whale_opt.check import check
from whale_opt.decision import Action, objective
from whale_opt.io import instance_from_dict, instance_to_dict
from whale_opt.problem_data import (
    DEFAULT_CLASS,
    DEFAULT_PRIORITY_CLASSES,
    Instance,
    Policy,
    PriorityClass,
)
from whale_opt.registry import get_policy
from whale_opt.testing import CUSTOM_CLASS_NAMES, gpu_types, instances, nodes, priority_classes

FAST = settings(max_examples=40, deadline=None)
FEATURES = (
    "priority",
    "aging",
    "guarantees",
    "preemption",
    "draining",
    "preferences",
    "sharing",
)
EVERYTHING = instances(max_nodes=5, max_queue=6, min_queue=1, **dict.fromkeys(FEATURES, True))


def _json(payload: object) -> object:
    """Through real JSON text, as a file would carry it."""
    return json.loads(json.dumps(payload))


def _classes_used(instance: Instance) -> set[str]:
    return {job.priority_class for job in instance.queue} | {
        job.priority_class for job in instance.running
    }


def _has_priority(instance: Instance) -> bool:
    return dict(instance.priority_classes) != dict(DEFAULT_PRIORITY_CLASSES) or bool(
        _classes_used(instance) - {DEFAULT_CLASS}
    )


def _has_guarantees(instance: Instance) -> bool:
    return any(tenant.guaranteed_gpus is not None for tenant in instance.tenants.values())


def _has_checkpoints(instance: Instance) -> bool:
    return any(job.since_checkpoint_s is not None for job in instance.running)


def _has_preferences(instance: Instance) -> bool:
    return any(job.preferred_gpu_types or job.prefer_nvlink for job in instance.queue)


def _invariants(instance: Instance) -> None:
    """What every generated instance promises beyond Instance's own checks."""
    for tenant in instance.tenants.values():
        if tenant.guaranteed_gpus is not None and tenant.gpu_quota is not None:
            assert tenant.guaranteed_gpus <= tenant.gpu_quota
    for job in instance.running:
        if job.since_checkpoint_s is not None:
            assert 0 <= job.since_checkpoint_s <= -job.started_at
    for name in instance.priority_classes:
        assert name in DEFAULT_PRIORITY_CLASSES or name in CUSTOM_CLASS_NAMES


# -- keywords force features on and off -----------------------------------------------


@FAST
@given(EVERYTHING)
def test_every_feature_forced_on_is_there(instance: Instance) -> None:
    _invariants(instance)
    policy = instance.policy
    assert policy.aging_per_hour > 0
    assert policy.allow_preemption
    assert any(node.draining for node in instance.nodes)
    assert _has_guarantees(instance)
    first = instance.queue[0]
    assert first.preferred_gpu_types or first.prefer_nvlink
    assert first.shares  # a third of such draws had no share before
    assert set(DEFAULT_PRIORITY_CLASSES) <= set(instance.priority_classes)
    assert instance.replace() == instance  # every cross-reference checked again


@FAST
@given(instances(**dict.fromkeys(FEATURES, False)))
def test_every_feature_forced_off_leaves_the_old_shape(instance: Instance) -> None:
    assert dict(instance.priority_classes) == dict(DEFAULT_PRIORITY_CLASSES)
    assert not _has_priority(instance)
    assert not _has_guarantees(instance)
    assert not _has_checkpoints(instance)
    assert not _has_preferences(instance)
    assert not any(node.draining for node in instance.nodes)
    assert not any(job.shares or job.cpu_only for job in instance.queue)
    assert not any(job.shares or not job.gpu_ids for job in instance.running)
    defaults = Policy()
    policy = instance.policy
    assert not policy.allow_preemption
    assert policy.aging_per_hour == 0.0
    assert (policy.min_run_s, policy.max_preemptions) == (0, None)
    assert (policy.gpu_type_penalty_s, policy.nvlink_penalty_s) == (
        defaults.gpu_type_penalty_s,
        defaults.nvlink_penalty_s,
    )


PREDICATES: dict[str, Callable[[Instance], bool]] = {
    "priority": _has_priority,
    "several-classes": lambda i: len(_classes_used(i)) >= 3,
    "custom-class": lambda i: bool(set(i.priority_classes) & set(CUSTOM_CLASS_NAMES)),
    "aging": lambda i: i.policy.aging_per_hour > 0,
    "guarantee-below-quota": lambda i: any(
        t.gpu_quota is not None and t.guaranteed_gpus is not None and t.guaranteed_gpus > 0
        for t in i.tenants.values()
    ),
    "preemption": lambda i: i.policy.allow_preemption and i.policy.min_run_s > 0,
    "max-preemptions": lambda i: i.policy.max_preemptions is not None,
    "checkpoints": _has_checkpoints,
    "draining": lambda i: any(node.draining for node in i.nodes),
    "preferred-gpu-types": lambda i: any(job.preferred_gpu_types for job in i.queue),
    "prefer-nvlink-soft": lambda i: any(
        job.prefer_nvlink and job.topology != "nvlink" and job.gpu_count > 1 for job in i.queue
    ),
}


SEARCH = settings(
    max_examples=400,
    database=None,
    derandomize=True,  # the same draws every run: no flakes, steady time
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


def test_default_draws_carry_every_feature_now_and_then() -> None:
    seen: set[str] = set()

    def everything_seen(instance: Instance) -> bool:
        seen.update(name for name, has in PREDICATES.items() if has(instance))
        return seen == set(PREDICATES)

    try:
        find(instances(max_nodes=4, max_queue=4, max_running=3), everything_seen, settings=SEARCH)
    except NoSuchExample:
        pytest.fail(f"{SEARCH.max_examples} default draws never had {set(PREDICATES) - seen}")


def test_priority_classes_sometimes_redefine_a_default() -> None:
    def redefines(classes: dict[str, PriorityClass]) -> bool:
        return any(
            DEFAULT_PRIORITY_CLASSES[name] != classes[name] for name in DEFAULT_PRIORITY_CLASSES
        )

    assert redefines(find(priority_classes(), redefines, settings=SEARCH))


def test_draining_nodes_sometimes_hold_running_work() -> None:
    def drains_work(instance: Instance) -> bool:
        nodes = {instance.parse_gpu(gpu).node for job in instance.running for gpu in job.gpu_ids}
        return any(instance.nodes[k].draining for k in nodes)

    assert drains_work(find(instances(max_nodes=4, draining=True), drains_work, settings=SEARCH))


# -- validity and files ----------------------------------------------------------------


@FAST
@given(st.one_of(EVERYTHING, instances(max_nodes=4, max_queue=6)))
def test_extended_instances_are_valid_and_round_trip_through_json(instance: Instance) -> None:
    _invariants(instance)
    assert instance.replace() == instance
    again = instance_from_dict(_json(instance_to_dict(instance)))
    assert again == instance
    assert again.weights == instance.weights
    assert again.running_weights == instance.running_weights


@settings(max_examples=30, deadline=None)
@given(priority_classes(min_custom=1))
def test_priority_classes_keep_the_defaults_and_add_custom_ones(
    classes: dict[str, PriorityClass],
) -> None:
    assert set(DEFAULT_PRIORITY_CLASSES) <= set(classes)
    custom = set(classes) - set(DEFAULT_PRIORITY_CLASSES)
    assert 1 <= len(custom) <= 2 and custom <= set(CUSTOM_CLASS_NAMES)
    for name, klass in classes.items():
        assert klass.name == name and klass.weight > 0


@settings(max_examples=30, deadline=None)
@given(gpu_types(), st.data())
def test_nodes_strategy_drains_only_when_asked(
    types: dict[str, object], data: st.DataObject
) -> None:
    draining = data.draw(nodes(list(types), draining=True), label="draining")
    assert any(node.draining for node in draining)
    plain = data.draw(nodes(list(types)), label="plain")
    assert not any(node.draining for node in plain)


# -- the greedy on extended instances ------------------------------------------------------


# Few nodes, many running jobs, classes and guarantees: where preempting can pay.
CONTENDED = instances(
    max_nodes=3,
    max_running=6,
    max_queue=4,
    min_queue=1,
    with_failures=False,
    priority=True,
    guarantees=True,
    preemption=True,
)


@settings(max_examples=50, deadline=None)
@given(st.one_of(EVERYTHING, CONTENDED, instances(max_nodes=5, max_queue=6)))
def test_wspt_decision_passes_the_checker_and_prices_itself(instance: Instance) -> None:
    decision = get_policy("wspt").decide(instance)
    target(float(len(decision.by_action(Action.PREEMPT))), label="preemptions")
    assert check(instance, decision) == []
    assert math.isclose(
        decision.objective, objective(instance, decision.jobs), rel_tol=1e-9, abs_tol=1e-6
    )
