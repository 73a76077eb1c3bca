"""The redundant cuts of the CP-SAT model (whale_opt.cpsat.cuts, earliest starts).

They must never cut off a valid decision: every heuristic's checked
decision, fixed into the whole round's model as its hint, stays a solution.
And they must earn their place: CP-SAT's own bound on a loaded round comes
out well above what it finds without them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from ortools.sat.python import cp_model

from whale_opt.check import check
from whale_opt.cpsat.cpmodel import NeighbourhoodModel
from whale_opt.cpsat.cuts import Capacity, prefix_sizes, slots
from whale_opt.cpsat.lns import whole_neighbourhood
from whale_opt.decision import Status
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.profile import Profile
from whale_opt.problem_data import Instance
from whale_opt.solve import solve
from whale_opt.testing import instances

HEURISTICS = ("fifo", "sjf", "wspt", "best-fit", "frag-aware")


def test_fill_puts_work_on_the_earliest_capacity() -> None:
    # 2 GPUs free on [0, 10), then 4.
    capacity = Capacity([0.0, 10.0], [2.0, 4.0])
    # 10 GPU-s: rate 2 on [0, 5): integral of 2t = 25; done at 5.
    assert capacity.fill(10) == pytest.approx((25.0, 5.0))
    # 28 GPU-s: 20 on [0, 10) (integral 100), then 8 at rate 4 on [10, 12) (88).
    assert capacity.fill(28) == pytest.approx((188.0, 12.0))


def test_nothing_free_until_a_release_shifts_the_fill() -> None:
    capacity = Capacity([0.0, 100.0], [0.0, 1.0])
    assert capacity.fill(10) == pytest.approx((100 * 10 + 50.0, 110.0))


def test_slots_count_whole_pieces_per_node() -> None:
    busy = Profile()
    busy.add(0, 50, 5)  # 3 of 8 GPUs free until 50, then 8
    idle = Profile()
    nodes = [(busy, 8), (idle, 8)]
    assert slots(nodes, 1).levels == [11.0, 16.0]
    assert slots(nodes, 4).levels == [2.0, 4.0]  # 3 free GPUs hold no 4-GPU piece
    assert slots(nodes, 8).levels == [1.0, 2.0]


def test_prefix_sizes_are_all_up_to_24_then_grow() -> None:
    assert prefix_sizes(5) == [1, 2, 3, 4, 5]
    sizes = prefix_sizes(64)
    assert sizes[:24] == list(range(1, 25)) and sizes[-1] == 64
    assert len(sizes) < 30


def _whole_round_model(instance: Instance, jobs: list) -> NeighbourhoodModel:
    hood, _, _ = whole_neighbourhood(instance, jobs)
    return NeighbourhoodModel(hood)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(instances(min_queue=1, max_queue=8, max_nodes=5))
def test_no_cut_removes_a_valid_decision(instance: Instance) -> None:
    for name in HEURISTICS:
        decision = solve(instance, name)
        assert check(instance, decision) == []
        built = _whole_round_model(instance, list(decision.jobs))
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.max_time_in_seconds = 10
        solver.parameters.num_workers = 1
        status = solver.solve(built.model)
        assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE), (name, solver.status_name(status))


def test_the_cuts_lift_cp_sats_bound_on_a_loaded_round() -> None:
    # A loaded DGX-1 round: 16 queued jobs on 64 GPUs, one of them (64 GPUs on
    # NVLink) with no placement ever. Without the earliest starts CP-SAT's bound
    # lets it run; with them the round is proven within a few seconds.
    instance = generate("dgx1", gpus=128, queued=16, seed=100)
    decision = solve(instance, "cpsat", SolveOptions(time_limit_s=20, seed=0))
    assert check(instance, decision) == []
    assert decision.status is Status.OPTIMAL
    assert decision.bound == pytest.approx(decision.objective, rel=1e-3)
