"""Lower bounds against brute force on tiny instances, against hand-made decisions, and
the Lagrangian bound where jobs contend for one node."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings

from whale_opt.bounds import (
    EarliestStarts,
    earliest_end_bound,
    earliest_times,
    flow_bound,
    lagrangian,
    lagrangian_bound,
    lower_bound,
    solve_lagrangian,
    without_preemptible,
)
from whale_opt.check import check
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob, RunningJob, Tenant
from whale_opt.registry import get_policy
from whale_opt.testing import instances

STATUS = (Status.FEASIBLE, 0.0, 0.0)
CONVERGED_S = 2.0  # far more than these rounds need: the Lagrangian ascent stops on convergence


def _soon(seconds: float = CONVERGED_S) -> float:
    return time.perf_counter() + seconds


def at_most(bound: float, value: float) -> bool:
    """``bound <= value`` up to float noise."""
    return bound <= value * (1 + 1e-9) + 1e-6


@settings(max_examples=40, deadline=None)
@given(instances(max_nodes=3, max_queue=4, max_running=2))
def test_bounds_are_below_every_serial_schedule(instance: Instance) -> None:
    # Serial schedule generation over ALL permutations of the queue covers the
    # greedy's whole search space, not every valid decision: the best of them
    # is an upper bound on the true optimum. A valid lower bound must sit below
    # the optimum, hence below every one of these schedules.
    values = []
    for order in itertools.permutations(range(len(instance.queue))):
        jobs = list_schedule(instance, order)
        decision = assemble(instance, "brute", jobs, Status.FEASIBLE, 0.0, 0.0)
        # Every order yields a valid schedule, not only Smith's.
        assert check(instance, decision) == [], order
        values.append(decision.objective)
    best = min(values)
    greedy = get_policy("wspt").decide(instance)
    plain = assemble(instance, "wspt", list_schedule(instance, wspt_order(instance)), *STATUS)
    assert plain.objective in values  # WSPT is one of the orders
    # The greedy preempts only when that beats its own list schedule.
    assert greedy.objective <= plain.objective * (1 + 1e-9) + 1e-6
    assert at_most(lower_bound(instance), best)
    assert at_most(greedy.bound, best)
    starts, ends = earliest_times(instance)
    assert at_most(earliest_end_bound(instance, ends), best)
    assert at_most(earliest_end_bound(instance), best)
    if not (instance.policy.allow_preemption and instance.running):
        assert at_most(flow_bound(instance, starts, ends), best)
    # The Lagrangian bound, whatever prices its ascent ends on: aimed at the best
    # schedule, and at a worse value (its steps then overshoot).
    assert at_most(lagrangian_bound(instance, best, _soon()), best)
    assert at_most(lagrangian_bound(instance, 2 * best, _soon()), best)


@settings(max_examples=40, deadline=None)
@given(instances(max_nodes=4, max_queue=6))
def test_earliest_times_are_consistent(instance: Instance) -> None:
    starts, ends = earliest_times(instance)
    for position, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if math.isinf(end):
            assert math.isinf(start)
            continue
        shortest = instance.min_duration(position)
        assert shortest is not None
        assert 0 <= start <= end - shortest
        assert start <= instance.policy.horizon_s


@settings(max_examples=60, deadline=None)
@given(instances(max_nodes=4, max_queue=6))
def test_times_found_once_per_job_shape_match_the_search_per_job(instance: Instance) -> None:
    # With only the running jobs present free capacity only grows: the earliest
    # start on a type is the same for every job of one shape, whatever it runs for.
    starts, ends = earliest_times(without_preemptible(instance))
    shaped_starts, shaped_ends = EarliestStarts(instance).times()
    for k, job in enumerate(instance.queue):
        if job.shares or job.cpu_only:
            assert shaped_starts[k] == 0.0 and shaped_ends[k] <= ends[k]
            continue
        assert (shaped_starts[k], shaped_ends[k]) == (starts[k], ends[k]), job


def test_bound_of_an_empty_queue_is_zero() -> None:
    inst = Instance("empty", {"A": GpuType("A", 80)}, (Node("n", "A", 8, "nvswitch"),))
    assert lower_bound(inst) == 0.0


def test_bound_is_exact_for_one_job_on_an_idle_node() -> None:
    inst = Instance(
        "one",
        {"A": GpuType("A", 80)},
        (Node("n", "A", 8, "nvswitch"),),
        queue=(QueuedJob("q", 4, 100, weight=2.0),),
    )
    assert lower_bound(inst) == pytest.approx(200.0)
    assert get_policy("wspt").decide(inst).objective == 200.0


def test_weights_past_the_flows_integers_give_a_valid_bound() -> None:
    """A weight of 1e16 (or one aged over years) once overflowed the flow's int64
    costs, and every solver raised."""
    inst = Instance(
        "heavy",
        {"A": GpuType("A", 80)},
        (Node("n", "A", 1, "pcie"),),
        queue=(QueuedJob("q0", 1, 1, weight=1e16), QueuedJob("q1", 1, 1)),
    )
    assert lower_bound(inst) <= 1e16 + 2
    for solver in ("wspt", "cpsat"):
        decision = get_policy(solver).decide(inst, SolveOptions(time_limit_s=0.5))
        assert check(inst, decision) == []
        assert decision.bound <= decision.objective == pytest.approx(1e16 + 2)


# -- regressions: valid decisions the greedy and the bound once missed -------------------
# (6-GPU NVLink job with a 4-GPU node of its type listed first; a gang of two 8-GPU
# nodes in a rack whose first node has 4 GPUs; an 'any' job waiting for its tenant's
# quota to free on a node it cannot use.)

TYPES = {"A100": GpuType("A100", 80, 1.0), "V100": GpuType("V100", 32, 0.5)}


def _decision(instance: Instance, *jobs: JobDecision) -> Decision:
    return Decision(
        instance.name,
        "hand",
        Status.FEASIBLE,
        objective(instance, jobs),
        0.0,
        instance.policy.horizon_s,
        jobs,
    )


def _on(node: str, count: int) -> tuple[str, ...]:
    return tuple(f"{node}/{i}" for i in range(count))


def _mixed_sizes_one_node() -> tuple[Instance, Decision]:
    """One type in 4- and 8-GPU nodes (the 4-GPU node first); a 6-GPU NVLink job."""
    inst = Instance(
        "mixed-sizes",
        TYPES,
        (Node("s4", "A100", 4, "nvswitch"), Node("s8", "A100", 8, "nvswitch")),
        queue=(QueuedJob("q1", 6, 100),),
    )
    start = JobDecision("q1", Action.START, gpu_ids=_on("s8", 6), start_s=0, end_s=100)
    return inst, _decision(inst, start)


def _mixed_sizes_gang() -> tuple[Instance, Decision]:
    """A rack with a 4-GPU node first, then two 8-GPU nodes; a 16-GPU NVLink gang."""
    inst = Instance(
        "mixed-rack",
        TYPES,
        (
            Node("s4", "A100", 4, "nvswitch"),
            Node("x8", "A100", 8, "nvswitch"),
            Node("y8", "A100", 8, "nvswitch"),
        ),
        queue=(QueuedJob("q1", 16, 100),),
    )
    ids = _on("x8", 8) + _on("y8", 8)
    return inst, _decision(inst, JobDecision("q1", Action.START, gpu_ids=ids, start_s=0, end_s=100))


def _quota_frees_elsewhere() -> tuple[Instance, Decision]:
    """An 'any' job waits for its tenant's quota, freed by a job on a node it cannot use."""
    inst = Instance(
        "quota-elsewhere",
        TYPES,
        (Node("v0", "V100", 8, "nvswitch"), Node("a0", "A100", 8, "nvswitch")),
        running=(RunningJob("r1", ("v0/0",), 1, tenant="nlp"),),
        queue=(QueuedJob("q1", 1, 4, tenant="nlp", topology="any", gpu_types=("A100",)),),
        tenants={"nlp": Tenant("nlp", 1)},
    )
    plan = JobDecision("q1", Action.PLANNED, start_s=1, end_s=5, nodes=("a0",), node_gpus=(1,))
    return inst, _decision(inst, plan, JobDecision("r1", Action.KEEP))


CASES = {
    "mixed-sizes-one-node": _mixed_sizes_one_node,
    "mixed-sizes-gang": _mixed_sizes_gang,
    "quota-frees-elsewhere": _quota_frees_elsewhere,
}


@pytest.mark.parametrize("case", CASES)
def test_hand_made_decisions_are_valid(case: str) -> None:
    inst, decision = CASES[case]()
    assert check(inst, decision) == []


@pytest.mark.parametrize("case", CASES)
def test_bound_is_below_a_valid_hand_made_decision(case: str) -> None:
    inst, decision = CASES[case]()
    assert at_most(lower_bound(inst), decision.objective)


@pytest.mark.parametrize("case", CASES)
def test_greedy_does_not_defer_a_job_that_fits(case: str) -> None:
    inst, decision = CASES[case]()
    greedy = get_policy("wspt").decide(inst)
    assert greedy.job("q1").action is not Action.DEFERRED
    assert greedy.objective <= decision.objective
    assert check(inst, greedy) == []


def test_a_spread_job_waits_only_for_the_cpu_beside_free_gpus() -> None:
    # Node a's GPUs are free but a CPU-only job holds all its CPU until 100;
    # node b is busy until 500. An 8-GPU `any` job asking 64 CPUs starts at 100
    # on a: the search must try the moment CPU frees, not only GPU releases.
    types = {"A": GpuType("A", 80)}
    nodes = (Node("a", "A", 8, "nvswitch", cpu=64), Node("b", "A", 8, "nvswitch", cpu=64))
    running = (
        RunningJob("cpu", (), 100, cpu=64, preemptible=False, node="a"),
        RunningJob("gpu", tuple(f"b/{k}" for k in range(8)), 500, preemptible=False),
    )
    queue = (QueuedJob("q", 8, duration_s=1000, cpu=64, topology="any"),)
    instance = Instance("cpu-first", types, nodes, running, queue)
    assert EarliestStarts(instance).start(0, "A") == 100
    starts, _ = earliest_times(instance)
    assert starts == [100.0]
    decision = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []
    (item,) = [item for item in decision.jobs if item.id == "q"]
    assert (item.start_s, item.nodes) == (100, ("a",))


# -- the Lagrangian bound: below checked decisions, stronger where jobs contend for nodes ---


@pytest.mark.parametrize("family", ["hetero", "mixed", "dgx1", "fragmented"])
def test_the_bound_is_below_a_checked_cpsat_decision(family: str) -> None:
    instance = generate(family, gpus=64, queued=12, seed=3)
    decision = get_policy("cpsat").decide(instance, SolveOptions(time_limit_s=1.0))
    assert check(instance, decision) == []
    bound = lagrangian_bound(instance, decision.objective, _soon())
    assert bound > 0
    assert at_most(bound, decision.objective)
    assert at_most(decision.bound, decision.objective)


def test_the_lp_prices_raise_the_bound_where_the_ascent_stops_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A loaded round (64 GPUs, 16 queued on 17 running). The LP's dual prices give
    # the relaxation's optimum: far above the prices at zero, where an ascent cut
    # short would stop, and at least what the whole ascent reaches (no prices give
    # more than the LP's optimum); a valid bound either way.
    instance = generate("fragmented", gpus=64, queued=16, seed=502)
    decision = get_policy("cpsat").decide(instance, SolveOptions(time_limit_s=2.0))
    assert check(instance, decision) == []
    # Time enough for the LP however loaded the machine (the ascent converges first).
    ascent = lagrangian_bound(instance, decision.objective, _soon(60.0))
    no_ascent = lagrangian_bound(instance, decision.objective, _soon(0.0))
    with monkeypatch.context() as patched:
        patched.setattr(lagrangian, "_ascend", lambda r, *args: (-math.inf, np.zeros_like(r.room)))
        with_lp = lagrangian_bound(instance, decision.objective, _soon(60.0))
    assert at_most(with_lp, decision.objective)
    assert with_lp > 1.01 * no_ascent
    assert with_lp >= ascent * (1 - 1e-6)


def test_the_prefix_rows_count_jobs_shorter_than_their_buckets() -> None:
    # Twelve 10 s jobs for one GPU: the optimum runs them one after the other, 780.
    # Each starts in a 20 s bucket, so none surely runs over any bucket: the bucket
    # rows' best prices (the LP's) leave every job at its own end, 120. Whatever
    # its start in its bucket, a job surely works 10 s before 10 s past the bucket's
    # end: the prefix rows count that, and raise the bound towards the optimum.
    nodes = (Node("n", "A100", 1, "pcie"),)
    queue = tuple(QueuedJob(f"j{i}", 1, 10) for i in range(12))
    instance = Instance("short", TYPES, nodes, (), queue)
    greedy = get_policy("wspt").decide(instance)
    assert greedy.objective == pytest.approx(780)
    relaxation = lagrangian._relax(instance)
    uses = lagrangian._Uses.of(relaxation)
    prices = lagrangian._lp_prices(relaxation, uses, _soon(60.0))
    assert prices is not None
    assert lagrangian._value(relaxation, uses, prices)[0] == pytest.approx(120)
    bound = lagrangian_bound(instance, greedy.objective, _soon())
    assert 400 <= bound <= 780


def test_an_lp_that_runs_out_of_time_leaves_the_prefix_rows_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The round above, with GLOP slow: it works until the time it is given and is
    # stopped unsolved. Given all of the bound's time, it left the prefix rows none,
    # and the bound stayed at the bucket rows' 120.
    nodes = (Node("n", "A100", 1, "pcie"),)
    queue = tuple(QueuedJob(f"j{i}", 1, 10) for i in range(12))
    instance = Instance("short", TYPES, nodes, (), queue)

    def slow_lp(relaxation: object, uses: object, deadline: float) -> None:
        time.sleep(max(0.0, deadline - time.perf_counter()))

    monkeypatch.setattr(lagrangian, "_lp_prices", slow_lp)
    bound = lagrangian_bound(instance, 780.0, _soon(2.0))
    assert 400 <= bound <= 780


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
    return Instance("gangs", TYPES, nodes, running, queue)


def test_two_jobs_for_one_node_are_priced_one_after_the_other() -> None:
    instance = _two_gangs_and_scattered_gpus()
    greedy = get_policy("wspt").decide(instance)
    assert greedy.objective == pytest.approx(11_000)
    # The analytic bounds let q's work trickle through the scattered GPUs.
    assert lower_bound(instance) < 10_000
    bound = lagrangian_bound(instance, greedy.objective, _soon())
    assert 10_900 <= bound <= 11_000


def test_the_relaxations_starts_are_where_its_prices_place_each_job() -> None:
    instance = _two_gangs_and_scattered_gpus()
    # No time to raise the prices: each job at its earliest start, a0 free at 1,000 s.
    unpriced = solve_lagrangian(instance, 11_000, time.perf_counter())
    assert unpriced.starts == {0: 1000, 1: 1000}
    # Raised: a0's price in the early buckets raises the bound and moves the two
    # jobs' starts later (neither before a0 frees).
    priced = solve_lagrangian(instance, 11_000, _soon())
    assert priced.bound > unpriced.bound + 1000
    assert set(priced.starts) == {0, 1}
    assert all(1000 < start <= 4000 + 1000 for start in priced.starts.values())


def test_the_ascent_takes_its_first_steps_past_its_deadline_within_its_wall() -> None:
    # A round's share may end before the ascent's first step (building the
    # relaxation took it): within the wall it still takes lagrangian.MIN_STEPS
    # steps, so the prices are not left at 0; without a wall it takes none.
    instance = _two_gangs_and_scattered_gpus()
    unpriced = solve_lagrangian(instance, 11_000, time.perf_counter())
    stepped = solve_lagrangian(instance, 11_000, time.perf_counter(), _soon())
    assert stepped.bound > unpriced.bound + 1000
    assert at_most(stepped.bound, 11_000)


def test_a_bound_out_of_time_is_still_valid() -> None:
    instance = _two_gangs_and_scattered_gpus()
    started = time.perf_counter()
    bound = lagrangian_bound(instance, 11_000, started)  # no time at all: prices stay 0
    assert time.perf_counter() - started < 1.0
    assert bound == pytest.approx(4000 + 4000)  # each job at its earliest end


def test_a_tenants_quota_keeps_its_jobs_one_after_the_other() -> None:
    # An idle 8-GPU node, but the tenant may hold 4 GPUs at once: its two 4-GPU
    # jobs of 1,000 s run one after the other. Optimum 1,000 + 2,000.
    instance = Instance(
        "quota",
        TYPES,
        (Node("a0", "A100", 8, "nvswitch"),),
        queue=(QueuedJob("p", 4, 1000, tenant="t"), QueuedJob("q", 4, 1000, tenant="t")),
        tenants={"t": Tenant("t", gpu_quota=4)},
    )
    greedy = get_policy("wspt").decide(instance)
    assert greedy.objective == pytest.approx(3000)
    assert lower_bound(instance) == pytest.approx(2000)  # the analytic bounds see no quota
    bound = lagrangian_bound(instance, greedy.objective, _soon())
    assert 2900 <= bound <= 3000


def test_a_preference_no_node_can_meet_is_paid_in_the_bound() -> None:
    # Only A100s, and the job prefers a V100 in zone "z": every placement pays both
    # prices (3,600 s each by default), times its weight.
    instance = Instance(
        "prices",
        TYPES,
        (Node("a0", "A100", 8, "nvswitch", zone="y"),),
        queue=(QueuedJob("p", 1, 1000, weight=2.0, preferred_gpu_types=("V100",), zone="z"),),
    )
    greedy = get_policy("wspt").decide(instance)
    assert greedy.objective == pytest.approx(2 * (1000 + 2 * 3600))
    assert lagrangian_bound(instance, greedy.objective, _soon()) == pytest.approx(greedy.objective)


def test_cpsat_reports_the_higher_bound() -> None:
    instance = _two_gangs_and_scattered_gpus()
    decision = get_policy("cpsat").decide(instance, SolveOptions(time_limit_s=1.0))
    assert check(instance, decision) == []
    assert decision.objective == pytest.approx(11_000)
    assert decision.bound >= 10_900
    assert "bound_s" in decision.stats


@pytest.mark.parametrize("family", ["mixed", "fragmented"])
def test_ascent_use_per_bucket_is_each_use_integrated_over_the_bucket(family: str) -> None:
    """``_Uses.made`` (running sums over the buckets the use ends fall in) against each
    picked use's overlap with each bucket, summed directly."""
    import numpy as np

    instance = generate(family, gpus=128, queued=40, seed=3)
    relaxation = lagrangian._relax(instance)
    assert not isinstance(relaxation, float)
    uses = lagrangian._Uses.of(relaxation)
    grid = relaxation.grid
    rng = np.random.default_rng(0)
    for share in (0.02, 0.3):
        picked = rng.random(len(relaxation.cost)) < share
        expected = np.zeros((uses.families, len(grid) - 1))
        for k in np.nonzero(picked[uses.choice])[0]:
            a, c = uses.hi[k], uses.end[k]
            overlap = np.clip(np.minimum(c, grid[1:]) - np.maximum(a, grid[:-1]), 0.0, None)
            expected[uses.family[k]] += uses.amount[k] * overlap
        made = uses.made(picked, grid)
        assert made.min() >= 0.0
        assert np.allclose(made, expected, rtol=1e-9, atol=1e-6 * max(1.0, expected.max()))
