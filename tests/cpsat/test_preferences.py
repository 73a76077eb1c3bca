"""Soft preferences, effective weights and draining nodes in the CP-SAT model.

The model prices a candidate by :func:`whale_opt.preferences.dropped`, the
objective's own rule, so the decision it decodes costs exactly what it
optimised: ``solve_model_from`` checks that on every solve, and these rounds
check the choices on cases whose optimum is plain. Weights are multiples of
0.001, so the model's integer weights are exact.
"""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.decision import Action, JobDecision, Status
from whale_opt.placement.serial import assemble, list_schedule

from .builders import H100, gpu_ids, holding, job, node, round_of, solve, solve_model_from


def _dropped(decision_item: object) -> set[str]:
    return {name for name, _ in getattr(decision_item, "dropped", ())}


@pytest.mark.parametrize(
    ("penalty_s", "gpu_type", "objective"), [(600, "a0", 1000), (300, "h0", 800)]
)
def test_gpu_type_preference_pays_its_price_only_when_that_is_cheaper(
    penalty_s: int, gpu_type: str, objective: float
) -> None:
    # H100 halves the run (1000 -> 500 s) but the job prefers A100: worth it only
    # when the price is below the 500 s it saves.
    instance = round_of(
        [node("a0"), node("h0", gpu_type=H100.name)],
        [job("q", 8, 1000, preferred_gpu_types=("A100-80G",))],
        gpu_type_penalty_s=penalty_s,
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert {g.rpartition("/")[0] for g in item.gpu_ids} == {gpu_type}
        assert decision.objective == pytest.approx(objective)
        assert _dropped(item) == ({"gpu_type"} if gpu_type == "h0" else set())


@pytest.mark.parametrize("penalty_s", [600, 3600, 6000])
def test_nvlink_preference_is_priced_as_the_objective_prices_each_choice(penalty_s: int) -> None:
    # Bridged pairs (0-1, 2-3); the running job holds 1 and 3 until 5000 s, so
    # only the unlinked 0 and 2 are free now. The job may start now unlinked
    # (1000 s + the price), or be planned: its linked pair frees at 5000 s. The
    # model must reach the cheapest valid choice as decision.objective prices it
    # (a plan at 1 s is judged on the node's links, not on the GPUs it will get).
    instance = round_of(
        [node("p0", 4, "pairs")],
        [job("q", 2, 1000, topology="node", prefer_nvlink=True)],
        [holding("r", "p0", [1, 3], 5000)],
        nvlink_penalty_s=penalty_s,
    )
    choices = [
        JobDecision("q", Action.START, gpu_ids=("p0/0", "p0/2"), start_s=0, end_s=1000),
        *(
            JobDecision(
                "q", Action.PLANNED, start_s=t, end_s=t + 1000, nodes=("p0",), node_gpus=(2,)
            )
            for t in (1, 5000)
        ),
    ]
    best = min(
        decision.objective
        for decision in (
            assemble(
                instance, "hand", [choice, JobDecision("r", Action.KEEP)], Status.FEASIBLE, 0.0, 0.0
            )
            for choice in choices
        )
        if check(instance, decision) == []
    )
    for decision in solve(instance):
        assert decision.objective == pytest.approx(best)
        item = decision.job("q")
        if item.action is Action.START:
            assert _dropped(item) == {"nvlink"}


def test_nvlink_preference_takes_the_linked_pair_when_one_is_free() -> None:
    # Free now: 0, 2 and 3; only 2-3 are linked. The greedy's placement is the
    # model's hint; the model must keep the linked pair and pay nothing.
    instance = round_of(
        [node("p0", 4, "pairs")],
        [job("q", 2, 1000, topology="node", prefer_nvlink=True)],
        [holding("r", "p0", [1], 5000)],
    )
    for decision in solve(instance):
        item = decision.job("q")
        assert set(item.gpu_ids) == gpu_ids("p0", [2, 3])
        assert decision.objective == pytest.approx(1000)
    # From a schedule that starts it on the unlinked 0 and 2, the model moves it.
    unlinked = [
        JobDecision(item.id, Action.START, gpu_ids=("p0/0", "p0/2"), start_s=0, end_s=1000)
        if item.id == "q"
        else item
        for item in list_schedule(instance, [0])
    ]
    decision, result = solve_model_from(instance, unlinked)
    assert set(decision.job("q").gpu_ids) == gpu_ids("p0", [2, 3])
    assert result.proved and result.value == pytest.approx(1000)


@pytest.mark.parametrize(("penalty_s", "action"), [(3600, Action.PLANNED), (600, Action.START)])
def test_spread_job_preferring_nvlink_counts_whole_linked_nodes_of_one_rack_as_shaped(
    penalty_s: int, action: Action
) -> None:
    # 16 GPUs over 8-GPU nodes: linked only as two whole nodes of one rack. Now
    # spans racks (a0 + b0, 1000 s + price); whole a0 + a1 once a1 frees (3000 s).
    instance = round_of(
        [node("a0", rack="r0"), node("a1", rack="r0"), node("b0", rack="r1")],
        [job("q", 16, 1000, topology="any", prefer_nvlink=True)],
        [holding("r", "a1", range(8), 2000)],
        nvlink_penalty_s=penalty_s,
    )
    greedy = list_schedule(instance, [0])
    decision, result = solve_model_from(instance, greedy)
    item = decision.job("q")
    assert item.action is action
    if action is Action.PLANNED:
        assert (set(item.nodes), item.start_s, _dropped(item)) == ({"a0", "a1"}, 2000, set())
        assert result.value == pytest.approx(3000)
    else:
        assert _dropped(item) == {"nvlink"}
        assert result.value == pytest.approx(1000 + penalty_s)
    assert result.proved


def test_every_preference_at_once_decodes_at_the_price_the_model_optimised() -> None:
    # Zone, GPU type and NVLink wanted by different jobs on a mixed cluster; some
    # honoured, some dropped. The model's optimum, re-priced by the objective, is
    # what it said (solve_model_from), and the round is never worse.
    instance = round_of(
        [
            node("a0", 4, "pairs", zone="east", rack="r0"),
            node("a1", 8, "hybrid-cube-mesh", zone="west", rack="r0"),
            node("h0", gpu_type=H100.name, zone="west", rack="r1"),
        ],
        [
            job("z", 4, 900, topology="any", zone="east", weight=2.0),
            job("t", 4, 1200, topology="node", preferred_gpu_types=("A100-80G",)),
            job("n", 3, 600, topology="node", prefer_nvlink=True, weight=0.5),
            job("s", 8, 2000, topology="any", prefer_nvlink=True, weight=1.5),
        ],
        [holding("r", "a1", [0, 5], 1500), holding("w", "h0", [0, 1, 2], 700)],
        zone_penalty_s=900,
        gpu_type_penalty_s=400,
        nvlink_penalty_s=1200,
    )
    round_decision, model_decision = solve(instance)
    decision, result = solve_model_from(instance, list(round_decision.jobs))
    assert result.proved
    assert decision.objective <= round_decision.objective + 1e-6
    assert model_decision.objective == pytest.approx(decision.objective)


def test_effective_weight_with_aging_orders_an_old_light_job_before_a_new_heavy_one() -> None:
    # Aging 1 per hour: the job waiting 10 hours weighs 1 x 11, the new one 5.
    instance = round_of(
        [node("a0")],
        [job("new", 8, 1000, weight=5.0), job("old", 8, 1000, submitted_at=-36_000)],
        aging_per_hour=1.0,
    )
    assert instance.weights == pytest.approx((5.0, 11.0))
    new_first = list_schedule(instance, [0, 1])
    decision, result = solve_model_from(instance, new_first)
    assert decision.job("old").action is Action.START
    assert result.proved and result.value == pytest.approx(11 * 1000 + 5 * 2000)


def test_priority_class_factor_weighs_an_online_job_ten_times() -> None:
    instance = round_of(
        [node("a0")],
        [job("train", 8, 1000, weight=5.0), job("serve", 8, 1000, priority_class="online")],
    )
    decision, result = solve_model_from(instance, list_schedule(instance, [0, 1]))
    assert decision.job("serve").action is Action.START
    assert decision.objective == pytest.approx(10 * 1000 + 5 * 2000)
    assert result.value == pytest.approx(decision.objective)


def test_draining_node_takes_no_new_work_and_keeps_its_running_job() -> None:
    # d0 is free but draining: the job waits for a0 (500 s) rather than start there.
    instance = round_of(
        [node("d0", draining=True), node("a0")],
        [job("q", 8, 1000), job("small", 1, 100, topology="any")],
        [holding("r", "a0", range(8), 500), holding("keep", "d0", [0], 3000)],
    )
    for decision in solve(instance):
        for job_id in ("q", "small"):
            item = decision.job(job_id)
            nodes = set(item.nodes) | {g.rpartition("/")[0] for g in item.gpu_ids}
            assert "d0" not in nodes
        assert decision.job("keep").action is Action.KEEP
