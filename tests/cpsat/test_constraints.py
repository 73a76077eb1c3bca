"""Each constraint family of the CP-SAT model on a tiny round where it matters.

Per family one round where the job can start now (or be placed) and one
where it cannot. Each round is solved twice (``builders.solve``): by the
CP-SAT round (``CpSatPolicy().decide``) and by the neighbourhood model alone
with every job freed. The round runs CP-SAT only when the greedy is not
proven optimal, so the model alone is what shows that a family neither lets
through what the checker forbids nor forbids what the optimum needs. Both
decisions pass the checker and are never worse than the greedy's.
"""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy
from whale_opt.decision import Action
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance

from .builders import A100, H100, gpu_ids, holding, job, node, round_of, solve, solve_round


def _nodes_of(gpus: tuple[str, ...]) -> set[str]:
    return {gpu.rpartition("/")[0] for gpu in gpus}


# -- select one type (or defer), nodes of the chosen type ----------------------------------


def test_select_one_type_picks_a_faster_type_later_when_it_ends_sooner() -> None:
    # A100 free now ends at 1000; H100 (speed 2) frees at 300 and ends at 800.
    instance = round_of(
        [node("a0"), node("h0", gpu_type=H100.name)],
        [job("q", 8, 1000)],
        [holding("r", "h0", range(8), 300)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert (item.nodes, item.start_s, item.end_s) == (("h0",), 300, 800)


def test_select_one_type_starts_now_when_the_fast_type_frees_too_late() -> None:
    instance = round_of(
        [node("a0"), node("h0", gpu_type=H100.name)],
        [job("q", 8, 1000)],
        [holding("r", "h0", range(8), 600)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START
        assert set(item.gpu_ids) == gpu_ids("a0", range(8))
        assert item.end_s == 1000


def test_select_one_type_defers_when_no_type_has_room_before_the_horizon() -> None:
    instance = round_of(
        [node("a0")], [job("q", 8, 1000)], [holding("r", "a0", range(8), 2000)], horizon_s=500
    )
    for decision in solve(instance):
        assert decision.job("q").action is Action.DEFERRED
        assert decision.objective == pytest.approx(500 + 1000)


def test_select_one_type_defers_a_job_no_gpu_type_can_serve() -> None:
    # Only A100 (80 GB) nodes; the job needs 100 GB GPUs: outside the model, deferred.
    instance = round_of([node("a0")], [job("q", 1, 1000, min_gpu_memory_gb=100)])
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.DEFERRED
        assert item.reason is not None and "100 GB" in item.reason


# -- deferred start ------------------------------------------------------------------------


def test_deferred_start_a_job_that_fits_before_the_horizon_is_planned() -> None:
    instance = round_of(
        [node("a0")], [job("q", 8, 1000)], [holding("r", "a0", range(8), 1500)], horizon_s=2000
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert (item.start_s, item.end_s) == (1500, 2500)
        assert decision.objective == pytest.approx(2500)


def test_deferred_start_a_deferred_job_costs_horizon_plus_duration() -> None:
    # Not horizon + start + duration: a deferred job's start is pinned to 0.
    instance = round_of(
        [node("a0")],
        [job("q", 8, 1000, weight=3.0)],
        [holding("r", "a0", range(8), 2500)],
        horizon_s=2000,
    )
    for decision in solve(instance):
        assert decision.job("q").action is Action.DEFERRED
        assert decision.objective == pytest.approx(3.0 * (2000 + 1000))


# -- start now or later --------------------------------------------------------------------


def test_start_now_or_later_free_gpus_start_now_at_zero() -> None:
    for decision in solve(round_of([node("a0")], [job("q", 4, 700)])):
        item = decision.job("q")
        assert item.action is Action.START
        assert (item.start_s, item.end_s) == (0, 700)


def test_start_now_or_later_gpus_freed_at_one_second_plan_the_job_at_one() -> None:
    instance = round_of([node("a0")], [job("q", 8, 700)], [holding("r", "a0", range(8), 1)])
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert (item.start_s, item.end_s) == (1, 701)
        assert decision.objective == pytest.approx(701)


# -- start-now choice: exact NVLink sets on one node ---------------------------------------


def test_start_now_choice_cube_mesh_linked_pair_starts_on_exactly_those_gpus() -> None:
    instance = round_of(
        [node("v0", nvlink="hybrid-cube-mesh")],
        [job("q", 2, 1000)],
        [holding("r", "v0", range(2, 8), 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START
        assert set(item.gpu_ids) == gpu_ids("v0", (0, 1))


def test_start_now_choice_cube_mesh_unlinked_pair_cannot_start_now() -> None:
    # Free GPUs 0 and 5 only: no NVLink between them on a DGX-1.
    instance = round_of(
        [node("v0", nvlink="hybrid-cube-mesh")],
        [job("q", 2, 1000)],
        [holding("r", "v0", (1, 2, 3, 4, 6, 7), 5000)],
    )
    for decision in solve(instance):
        assert decision.job("q").action is not Action.START


def test_start_now_choice_job_blocked_by_fragmentation_is_not_planned_before_a_release() -> None:
    instance = round_of(
        [node("v0", nvlink="hybrid-cube-mesh")],
        [job("q", 2, 1000)],
        [holding("r", "v0", (1, 2, 3, 4, 6, 7), 5000)],
    )
    item = solve_round(instance).job("q")
    assert item.action is Action.PLANNED and item.start_s == 5000


def test_start_now_choice_node_job_cannot_split_over_two_nodes() -> None:
    instance = round_of(
        [node("a0", nvlink="pcie"), node("a1", nvlink="pcie")],
        [job("q", 6, 1000, topology="node")],
        [holding("r0", "a0", range(4), 5000), holding("r1", "a1", range(4), 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert item.start_s == 5000 and item.nodes in (("a0",), ("a1",))


# -- start-now choice: whole-node gangs of one rack ----------------------------------------


def test_start_now_choice_gang_takes_two_whole_free_nodes_of_one_rack() -> None:
    instance = round_of(
        [node("a0", rack="r1"), node("a1", rack="r1"), node("a2", rack="r2")],
        [job("q", 16, 1000)],
        [holding("r", "a2", (0,), 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START
        assert set(item.gpu_ids) == gpu_ids("a0", range(8)) | gpu_ids("a1", range(8))


def test_start_now_choice_gang_with_one_whole_free_node_per_rack_cannot_start_now() -> None:
    # r1: a0 free, a1 has one busy GPU; r2: a2 free. No rack has two whole free nodes.
    instance = round_of(
        [node("a0", rack="r1"), node("a1", rack="r1"), node("a2", rack="r2")],
        [job("q", 16, 1000)],
        [holding("r", "a1", (0,), 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert set(item.nodes) == {"a0", "a1"} and item.start_s == 5000


def test_start_now_choice_nvlink_job_the_size_of_the_larger_node_starts_there() -> None:
    # One GPU type in 4- and 8-GPU nodes: the 8-GPU job fits the free 8-GPU node whole
    # (it is no gang of 4-GPU nodes just because a 4-GPU node comes first).
    instance = round_of(
        [node("small", 4, rack="r1"), node("big", 8, rack="r1")],
        [job("q", 8, 1000)],
        [holding("r", "small", (0,), 10_000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START
        assert set(item.gpu_ids) == gpu_ids("big", range(8))


@pytest.mark.parametrize("small_type", [A100.name, H100.name])
def test_start_now_choice_job_that_is_a_gang_on_small_nodes_and_single_on_big_ones(
    small_type: str,
) -> None:
    instance = round_of(
        [node("s0", 2, "pairs", gpu_type=small_type), node("a0")],
        [job("q", 4, 1000), job("q2", 8, 1000)],
    )
    decision = CpSatPolicy().decide(instance, SolveOptions(time_limit_s=0.5))
    assert check(instance, decision) == []


# -- start-now choice: GPU counts spread over nodes (rack / any) ---------------------------


def _spread_round(topology: str, racks: tuple[str, str]) -> Instance:
    """Two PCIe nodes with 4 free GPUs each (in ``racks``), one 6-GPU job."""
    return round_of(
        [node("a0", nvlink="pcie", rack=racks[0]), node("a1", nvlink="pcie", rack=racks[1])],
        [job("q", 6, 1000, topology=topology)],
        [holding("r0", "a0", range(4), 5000), holding("r1", "a1", range(4), 5000)],
    )


@pytest.mark.parametrize("topology", ["rack", "any"])
def test_start_now_choice_spread_job_takes_free_gpus_of_two_nodes_in_one_rack(
    topology: str,
) -> None:
    for decision in solve(_spread_round(topology, ("r1", "r1"))):
        item = decision.job("q")
        assert item.action is Action.START
        assert len(item.gpu_ids) == 6 and _nodes_of(item.gpu_ids) == {"a0", "a1"}


def test_start_now_choice_rack_job_cannot_spread_over_two_racks() -> None:
    for decision in solve(_spread_round("rack", ("r1", "r2"))):
        item = decision.job("q")
        assert item.action is Action.PLANNED and item.start_s == 5000


def test_start_now_choice_any_job_spreads_over_two_racks() -> None:
    for decision in solve(_spread_round("any", ("r1", "r2"))):
        item = decision.job("q")
        assert item.action is Action.START
        assert _nodes_of(item.gpu_ids) == {"a0", "a1"}


# -- node capacity now: GPUs, CPU, host memory ---------------------------------------------


def test_now_node_capacity_two_jobs_that_fit_the_free_gpus_both_start() -> None:
    instance = round_of(
        [node("a0", nvlink="pcie")],
        [job("q1", 4, 1000, topology="node"), job("q2", 4, 1000, topology="node")],
    )
    for decision in solve(instance):
        assert {decision.job(q).action for q in ("q1", "q2")} == {Action.START}


def test_now_node_capacity_two_jobs_over_the_free_gpus_only_one_starts() -> None:
    instance = round_of(
        [node("a0", nvlink="pcie")],
        [job("q1", 4, 1000, topology="node"), job("q2", 4, 1000, topology="node")],
        [holding("r", "a0", (0, 1), 5000)],
    )
    for decision in solve(instance):
        actions = sorted(decision.job(q).action for q in ("q1", "q2"))
        assert actions == [Action.PLANNED, Action.START]
        assert decision.objective == pytest.approx(1000 + 2000)


@pytest.mark.parametrize("resource", ["cpu", "memory_gb"])
def test_now_node_capacity_job_within_the_free_host_resource_starts(resource: str) -> None:
    # a0 has free GPUs and 4 units of the resource left; a1 is full.
    instance = round_of(
        [node("a0", **{resource: 64}), node("a1")],
        [job("q", 4, 1000, **{resource: 4})],
        [
            holding("r0", "a0", (0,), 1000, **{resource: 60}),
            holding("r1", "a1", range(8), 5000),
        ],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START
        assert _nodes_of(item.gpu_ids) == {"a0"}


@pytest.mark.parametrize("resource", ["cpu", "memory_gb"])
def test_now_node_capacity_host_resource_too_small_on_the_only_free_node(resource: str) -> None:
    # Same round, but the job needs 16 units: it waits for r0 to end at 1000.
    instance = round_of(
        [node("a0", **{resource: 64}), node("a1")],
        [job("q", 4, 1000, **{resource: 16})],
        [
            holding("r0", "a0", (0,), 1000, **{resource: 60}),
            holding("r1", "a1", range(8), 5000),
        ],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert (item.nodes, item.start_s, item.end_s) == (("a0",), 1000, 2000)


@pytest.mark.parametrize("resource", ["cpu", "memory_gb"])
def test_now_node_capacity_two_jobs_over_the_host_resource_only_one_starts(
    resource: str,
) -> None:
    # Each job alone fits the node's 64 units, the two together do not.
    instance = round_of(
        [node("a0", **{resource: 64})],
        [job("q1", 4, 1000, **{resource: 40}), job("q2", 4, 1000, **{resource: 40})],
    )
    for decision in solve(instance):
        actions = sorted(decision.job(q).action for q in ("q1", "q2"))
        assert actions == [Action.PLANNED, Action.START]
        assert decision.objective == pytest.approx(1000 + 2000)


# -- exact GPU sets exclusive --------------------------------------------------------------


def test_now_gpu_exclusive_two_pairs_in_a_free_quad_both_start() -> None:
    instance = round_of(
        [node("v0", nvlink="hybrid-cube-mesh")],
        [job("q1", 2, 1000), job("q2", 2, 1000)],
        [holding("r", "v0", range(4), 5000)],
    )
    for decision in solve(instance):
        first, second = decision.job("q1"), decision.job("q2")
        assert first.action is second.action is Action.START
        assert set(first.gpu_ids) | set(second.gpu_ids) == gpu_ids("v0", range(4, 8))


def test_now_gpu_exclusive_two_pairs_needing_the_same_gpu_only_one_starts() -> None:
    # Free GPUs 0, 5, 6, 7: four free, but every linked pair lies in {5, 6, 7}.
    instance = round_of(
        [node("v0", nvlink="hybrid-cube-mesh")],
        [job("q1", 2, 1000), job("q2", 2, 1000)],
        [holding("r", "v0", range(1, 5), 5000)],
    )
    for decision in solve(instance):
        started = decision.by_action(Action.START)
        assert len(started) == 1
        assert set(started[0].gpu_ids) <= gpu_ids("v0", (5, 6, 7))


# -- capacity over time --------------------------------------------------------------------


def test_capacity_over_time_two_busy_nodes_plan_both_jobs_when_they_free() -> None:
    instance = round_of(
        [node("a0"), node("a1")],
        [job("q1", 8, 1000, weight=2.0), job("q2", 8, 1000)],
        [holding("r0", "a0", range(8), 1000), holding("r1", "a1", range(8), 1000)],
    )
    for decision in solve(instance):
        assert [decision.job(q).start_s for q in ("q1", "q2")] == [1000, 1000]
        assert decision.objective == pytest.approx(2.0 * 2000 + 2000)


def test_capacity_over_time_one_busy_node_runs_the_two_jobs_one_after_the_other() -> None:
    instance = round_of(
        [node("a0")],
        [job("q1", 8, 1000, weight=2.0), job("q2", 8, 1000)],
        [holding("r0", "a0", range(8), 1000)],
    )
    for decision in solve(instance):
        assert [decision.job(q).start_s for q in ("q1", "q2")] == [1000, 2000]
        assert decision.objective == pytest.approx(2.0 * 2000 + 3000)


# -- tenant quotas -------------------------------------------------------------------------


def test_tenant_quotas_job_within_its_quota_starts_now() -> None:
    instance = round_of([node("a0")], [job("q", 4, 1000, tenant="nlp")], quotas={"nlp": 4})
    for decision in solve(instance):
        assert decision.job("q").action is Action.START


def test_tenant_quotas_job_larger_than_its_quota_is_deferred() -> None:
    instance = round_of([node("a0")], [job("q", 4, 1000, tenant="nlp")], quotas={"nlp": 2})
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.DEFERRED
        assert item.reason is not None and "quota" in item.reason


def test_tenant_quotas_job_waits_for_its_tenants_running_work_to_end() -> None:
    # a1 is free, but the tenant's 8-GPU quota is full until r ends at 500;
    # another tenant's job takes a1 now.
    instance = round_of(
        [node("a0"), node("a1")],
        [job("q", 8, 1000, tenant="nlp", weight=5.0), job("other", 4, 1000, tenant="cv")],
        [holding("r", "a0", range(8), 500, tenant="nlp")],
        quotas={"nlp": 8},
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED
        assert (item.start_s, item.end_s) == (500, 1500)
        assert decision.job("other").action is Action.START
        assert decision.objective == pytest.approx(5.0 * 1500 + 1000)


def test_tenant_quotas_tenant_already_over_quota_starts_nothing_until_under() -> None:
    instance = round_of(
        [node("a0"), node("a1")],
        [job("q", 1, 1000, tenant="nlp")],
        [holding("r", "a0", range(8), 500, tenant="nlp")],
        quotas={"nlp": 4},
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.PLANNED and item.start_s == 500


# -- zone preference -----------------------------------------------------------------------


def test_zone_preference_job_waits_a_little_for_its_zone() -> None:
    # Starting now in the west costs 1000 + 3600; waiting for the east costs 500 + 1000.
    instance = round_of(
        [node("w0", zone="west"), node("e0", zone="east")],
        [job("q", 8, 1000, zone="east")],
        [holding("r", "e0", range(8), 500)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert (item.action, item.nodes, item.start_s) == (Action.PLANNED, ("e0",), 500)
        assert decision.objective == pytest.approx(1500)


def test_zone_preference_job_pays_the_penalty_rather_than_wait_long() -> None:
    instance = round_of(
        [node("w0", zone="west"), node("e0", zone="east")],
        [job("q", 8, 1000, zone="east")],
        [holding("r", "e0", range(8), 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert item.action is Action.START and _nodes_of(item.gpu_ids) == {"w0"}
        assert decision.objective == pytest.approx(1000 + 3600)
