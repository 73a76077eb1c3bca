"""Priority classes and effective weights in the heuristics' orders."""

from __future__ import annotations

import pytest

from whale_opt.check import check
from whale_opt.decision import Action, Decision
from whale_opt.policies.hybrid import HybridPolicy
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, Policy, PriorityClass, QueuedJob
from whale_opt.registry import REGISTRY, get_policy

HEURISTICS = sorted(name for name in REGISTRY if name not in ("cpsat", "greedy", "learned"))
HOUR = 3600


def one_node(*queue: QueuedJob, policy: Policy | None = None, **fields: object) -> Instance:
    """A round on one idle 8-GPU NVSwitch node."""
    return Instance(
        name="priority",
        gpu_types={"a100": GpuType("a100", 80.0)},
        nodes=(Node("n0", "a100", 8, "nvswitch"),),
        queue=queue,
        policy=policy or Policy(),
        **fields,  # type: ignore[arg-type]
    )


def decided(instance: Instance, name: str) -> Decision:
    decision = get_policy(name).decide(instance)
    assert check(instance, decision) == [], name
    return decision


def started(decision: Decision) -> list[str]:
    return [item.id for item in decision.by_action(Action.START)]


@pytest.mark.parametrize("name", HEURISTICS)
def test_an_online_job_starts_before_a_heavier_training_job(name: str) -> None:
    # By every policy's own key the training job goes first: heavier (Smith's ratio
    # 100 x that of the online job's effective 10 / 10x the duration), shorter, larger
    # or as large, submitted earlier, no attained service either. The class decides.
    instance = one_node(
        QueuedJob("train", 8, 100, weight=100.0, submitted_at=-HOUR),
        QueuedJob("serve", 8, 1000, priority_class="online", submitted_at=0),
    )
    assert started(decided(instance, name)) == ["serve"]


@pytest.mark.parametrize("name", HEURISTICS)
def test_best_effort_goes_last_even_when_it_came_first(name: str) -> None:
    instance = one_node(
        QueuedJob("spot", 8, 100, weight=50.0, priority_class="best-effort", submitted_at=-HOUR),
        QueuedJob("train", 8, 100, submitted_at=0),
    )
    assert started(decided(instance, name)) == ["train"]


def test_a_custom_class_rank_orders_before_the_defaults() -> None:
    urgent = PriorityClass("urgent", weight=0.5, rank=5, preemptible=False)
    instance = one_node(
        QueuedJob("serve", 8, 100, priority_class="online"),
        QueuedJob("page", 8, 100, priority_class="urgent"),
        priority_classes={"urgent": urgent, "online": PriorityClass("online", 10.0, 2, False)},
    )
    assert wspt_order(instance) == [1, 0]
    assert started(decided(instance, "wspt")) == ["page"]


def test_wspt_ranks_by_effective_weight_with_aging() -> None:
    # Within one class: weight 1 aged 10 hours at 100 %/hour is 11, more than a fresh 5.
    jobs = (
        QueuedJob("fresh", 8, 100, weight=5.0, submitted_at=0),
        QueuedJob("aged", 8, 100, weight=1.0, submitted_at=-10 * HOUR),
    )
    assert started(decided(one_node(*jobs), "wspt")) == ["fresh"]
    aging = one_node(*jobs, policy=Policy(aging_per_hour=1.0))
    assert aging.weights == pytest.approx((5.0, 11.0))
    assert started(decided(aging, "wspt")) == ["aged"]


def test_hybrid_does_not_age_twice_when_the_instance_ages_weights() -> None:
    def round_with(waited_h: float, policy: Policy) -> Instance:
        return one_node(
            QueuedJob("fresh-heavy", 8, 600, weight=4.0, submitted_at=0),
            QueuedJob("old-light", 8, 600, submitted_at=-int(waited_h * HOUR)),
            policy=policy,
        )

    # The instance's rate: old-light weighs 1 x (1 + 2) = 3 < 4 after 2 h, 5 > 4 after 4 h.
    # Aged again by the policy's own 1/h, it would weigh 5 after 2 h and jump the queue.
    aging = Policy(aging_per_hour=1.0)
    assert started(decided(round_with(2, aging), "hybrid")) == ["fresh-heavy"]
    assert started(decided(round_with(4, aging), "hybrid")) == ["old-light"]
    # Without an instance rate, the policy's own linear aging applies: 1 + 2 = 3 < 4.
    no_rate = Policy(aging_per_hour=0.0)
    assert started(decided(round_with(2, no_rate), "hybrid")) == ["fresh-heavy"]
    assert started(HybridPolicy(aging_per_hour=2.0).decide(round_with(2, no_rate))) == [
        "old-light"  # 1 + 2 x 2 = 5 > 4
    ]
