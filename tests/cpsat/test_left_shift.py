"""The whole round's model keeps to left-shifted schedules (``Constraints._left_shifted``).

It is a dominance, not a rule: it must never change a round's proven
optimum, and every job the model plans must start at one of its moments
(1, a running job's end, another placed job's end).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from whale_opt.cpsat.cpmodel import WHOLE_PARAMETERS, HoodResult, NeighbourhoodModel
from whale_opt.cpsat.lns import whole_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.decision import Action
from whale_opt.generate import generate
from whale_opt.problem_data import Instance, RunningJob
from whale_opt.solve import wspt_greedy
from whale_opt.testing import instances

from .builders import H100, holding, job, node, round_of

LIMIT_S = 20.0


def _whole_round(
    instance: Instance, *, left_shift: bool, deterministic_s: float | None = None
) -> HoodResult:
    """The whole round's model from wspt's decision, solved by CP-SAT."""
    hood, _, _ = whole_neighbourhood(instance, wspt_greedy(instance))
    built = NeighbourhoodModel(hood, whole=left_shift)
    parameters = {**load_preset(None).parameters, **WHOLE_PARAMETERS}
    result = built.solve(parameters, LIMIT_S, 0, deterministic_s, whole=True)
    assert result is not None
    return result


@pytest.mark.parametrize(
    ("family", "gpus", "queued", "seed"),
    [("hetero", 64, 8, 3), ("dgx1", 64, 8, 4), ("mixed", 128, 8, 5), ("fragmented", 64, 8, 6)],
)
def test_the_proven_optimum_is_the_same_with_and_without_it(
    family: str, gpus: int, queued: int, seed: int
) -> None:
    instance = generate(family, gpus=gpus, queued=queued, seed=seed)
    shifted = _whole_round(instance, left_shift=True)
    free = _whole_round(instance, left_shift=False)
    assert shifted.proved and free.proved
    assert shifted.value == pytest.approx(free.value, rel=1e-9)


def test_a_victim_of_the_quota_elsewhere_is_a_moment() -> None:
    # Tenant t may hold 1 GPU. Its running job r, on an H100 node that job q cannot
    # use, ends at 500 unless preempted (h, of a higher class, may displace it;
    # that costs more than q's wait). q, on the idle A100 node, starts once r
    # ends: at 500, a moment of no node of q's. Missed, the model preempted r
    # and its "optimum" was 3,500 against 2,000.
    instance = round_of(
        [node("a0", 2), node("h0", 2, gpu_type=H100.name)],
        [
            job("q", 1, 1000, tenant="t", gpu_types=("A100-80G",)),
            job("h", 1, 100, tenant="u", gpu_types=(H100.name,), priority_class="online"),
        ],
        [
            holding(
                "r", "h0", [0], 500, tenant="t", priority_class="best-effort", checkpoint_s=20000
            )
        ],
        quotas={"t": 1, "u": 8},
        allow_preemption=True,
    )
    shifted = _whole_round(instance, left_shift=True)
    free = _whole_round(instance, left_shift=False)
    assert shifted.proved and free.proved
    assert shifted.value == pytest.approx(free.value, rel=1e-9)
    (q,) = [item for item in shifted.decided.values() if item.id == "q"]
    assert q.start_s == 500


@pytest.mark.parametrize(
    ("gpus", "running"),
    [
        # A job asking no CPU or memory: its end changes no use on the node.
        (4, [holding("x", "a0", [1, 3], 5000), RunningJob("y", (), 100, node="a0")]),
        # A share under a longer one listed first on GPU 7: its end changes no use.
        (
            8,
            [
                holding("x", "a0", [1, 3, 5], 5000),
                holding("s2", "a0", [7], 5000, gpu_milli=500),
                holding("s1", "a0", [7], 100, gpu_milli=500),
            ],
        ),
    ],
    ids=["cpu-only", "share"],
)
def test_the_release_rules_first_end_is_a_moment(gpus: int, running: list[RunningJob]) -> None:
    # No linked pair of a0's GPUs is free now; by count q fits at any time, but
    # the release rule holds a planned NVLink job until a job on the node ends:
    # at 100, where no use changes. Missed, the model's "optimum" was 6,000 (q at
    # 5,000) against 1,100 (found in review).
    instance = round_of([node("a0", gpus, nvlink="pairs")], [job("q", 2, 1000)], running)
    shifted = _whole_round(instance, left_shift=True)
    free = _whole_round(instance, left_shift=False)
    assert shifted.proved and free.proved
    assert shifted.value == pytest.approx(free.value, rel=1e-9)
    (q,) = shifted.decided.values()
    assert q.start_s == 100


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(instances(min_queue=2, max_queue=6, max_nodes=4))
def test_it_never_changes_the_optimum_of_a_drawn_round(instance: Instance) -> None:
    # Quotas, failed GPUs, CPU and memory, preemption and shares all drawn.
    shifted = _whole_round(instance, left_shift=True)
    free = _whole_round(instance, left_shift=False)
    assume(shifted.proved and free.proved)
    assert shifted.value == pytest.approx(free.value, rel=1e-9, abs=1e-6)


def test_every_planned_job_starts_when_something_ends() -> None:
    # 16 jobs on 64 GPUs, stopped unproven: without the dominance five of its
    # planned jobs start between moments (OR-Tools 9.15, the same deterministic time).
    instance = generate("hetero", gpus=64, queued=16, seed=8)
    result = _whole_round(instance, left_shift=True, deterministic_s=1.0)
    placed = [item for item in result.decided.values() if item.action is not Action.DEFERRED]
    planned = [item for item in placed if item.action is Action.PLANNED]
    assert planned  # a loaded round: most of it waits
    running_ends = {job.remaining_s for job in instance.running}
    for item in planned:
        others = {other.end_s for other in placed if other is not item}
        assert item.start_s in {1} | running_ends | others, item
