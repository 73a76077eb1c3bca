"""The Lagrangian bound: valid below checked decisions, stronger where jobs contend for nodes.

(Below every serial schedule of tiny rounds: ``tests/test_bounds.py``, with the other bounds.)"""

from __future__ import annotations

import time

import pytest

from whale_opt.bounds import lagrangian_bound, lower_bound
from whale_opt.check import check
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob, RunningJob
from whale_opt.registry import get_policy

A100 = {"A100": GpuType("A100", 80)}
CONVERGED_S = 2.0  # far more than these rounds need: the ascent stops on convergence


def _soon(seconds: float = CONVERGED_S) -> float:
    return time.perf_counter() + seconds


def at_most(bound: float, value: float) -> bool:
    """``bound <= value`` up to float noise."""
    return bound <= value * (1 + 1e-9) + 1e-6


@pytest.mark.parametrize("family", ["hetero", "mixed", "dgx1", "fragmented"])
def test_the_bound_is_below_a_checked_cpsat_decision(family: str) -> None:
    instance = generate(family, gpus=64, queued=12, seed=3)
    decision = get_policy("cpsat").decide(instance, SolveOptions(time_limit_s=1.0))
    assert check(instance, decision) == []
    bound = lagrangian_bound(instance, decision.objective, _soon())
    assert bound > 0
    assert at_most(bound, decision.objective)
    assert at_most(decision.bound, decision.objective)


def _two_gangs_and_scattered_gpus() -> Instance:
    # Two 8-GPU nodes, each half held: 8 GPUs are free now, but no 8-GPU NVLink job
    # fits before a0 frees at 1,000 s (a1 frees at 5,000 s). p and q (3,000 s each)
    # must run one after the other: p on a0 from 1,000, q on a0 from 4,000. Optimum
    # 4,000 + 7,000.
    nodes = (Node("a0", "A100", 8, "nvswitch"), Node("a1", "A100", 8, "nvswitch"))
    running = (
        RunningJob("r0", tuple(f"a0/{i}" for i in range(4)), 1000),
        RunningJob("r1", tuple(f"a1/{i}" for i in range(4)), 5000),
    )
    queue = (QueuedJob("p", 8, 3000), QueuedJob("q", 8, 3000))
    return Instance("gangs", A100, nodes, running, queue)


def test_two_jobs_for_one_node_are_priced_one_after_the_other() -> None:
    instance = _two_gangs_and_scattered_gpus()
    greedy = get_policy("wspt").decide(instance)
    assert greedy.objective == pytest.approx(11_000)
    # The analytic bounds let q's work trickle through the scattered GPUs.
    assert lower_bound(instance) < 10_000
    bound = lagrangian_bound(instance, greedy.objective, _soon())
    assert 10_900 <= bound <= 11_000


def test_a_bound_out_of_time_is_still_valid() -> None:
    instance = _two_gangs_and_scattered_gpus()
    started = time.perf_counter()
    bound = lagrangian_bound(instance, 11_000, started)  # no time at all: prices stay 0
    assert time.perf_counter() - started < 1.0
    assert bound == pytest.approx(4000 + 4000)  # each job at its earliest end


def test_cpsat_reports_the_higher_bound() -> None:
    instance = _two_gangs_and_scattered_gpus()
    decision = get_policy("cpsat").decide(instance, SolveOptions(time_limit_s=1.0))
    assert check(instance, decision) == []
    assert decision.objective == pytest.approx(11_000)
    assert decision.bound >= 10_900
    assert "bound_s" in decision.stats
