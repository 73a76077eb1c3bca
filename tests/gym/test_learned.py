"""The learned policy: a short training end to end, and every guardrail through the checker."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from whale_opt.check import check
from whale_opt.decision import Decision, Status
from whale_opt.gym import GpuClusterEnv
from whale_opt.gym.train import TrainConfig, load_cluster, plot_curve, train
from whale_opt.options import SolveOptions
from whale_opt.policies import WsptPolicy
from whale_opt.policies.learned import (
    CHECKPOINT_ENV,
    FALLBACK_REASONS,
    Encoding,
    LearnedPolicy,
    PartialRound,
)
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.registry import get_policy
from whale_opt.sim import SimConfig, simulate, synthetic_trace
from whale_opt.sim.engine import EventLoop

from .conftest import synthetic_config

TINY = TrainConfig(
    cluster="a100-4x8",
    trace_seeds=(1, 2),
    n_jobs=16,
    timesteps=256,
    n_steps=128,
    batch_size=64,
    n_epochs=2,
    checkpoint_every=128,
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two PPO iterations on two 16-job traces of the A100 cluster (a few seconds)."""
    # torch and sb3-contrib come with the rl extra (and dev: CI runs this); the
    # guardrail tests below need neither
    pytest.importorskip("sb3_contrib")
    out = tmp_path_factory.mktemp("learned")
    result = train(TINY, out)
    assert result.timesteps >= TINY.timesteps and result.wall_s > 0
    return result.model


def a_round(config_changes: dict | None = None) -> tuple[Instance, Encoding]:
    """A busy round of the 32-GPU synthetic cluster, and its encoding."""
    env = GpuClusterEnv(synthetic_config(n_jobs=24, **(config_changes or {})))
    env.reset(seed=2)
    assert env.pending is not None
    return env.pending.instance, env.encoding


def assert_fallback(decision: Decision, instance: Instance, code: int) -> None:
    """A wspt decision marked greedy-fallback with reason ``code``, valid for the checker."""
    assert decision.status is Status.GREEDY_FALLBACK
    assert decision.solver == "learned"
    assert decision.stats["fallback"] == 1 and decision.stats["fallback_reason"] == code
    assert decision.jobs == WsptPolicy().decide(instance).jobs
    assert check(instance, decision) == []


def test_training_writes_a_model_the_policy_loads_and_runs(trained: Path, tmp_path) -> None:
    out = trained.parent
    assert (out / "model.json").is_file() and (out / "train.json").is_file()
    assert sorted(p.name for p in (out / "checkpoints").glob("*.zip"))
    assert plot_curve(pd.read_csv(out / "curve.csv"), tmp_path / "c.png").is_file()
    cluster = load_cluster("a100-4x8")
    trace = synthetic_trace(16, cluster, load=1.2, seed=100)  # a seed training never saw
    policy = LearnedPolicy(trained)
    result = simulate(trace, cluster, SimConfig(seed=100, check_decisions=True), policy=policy)
    assert result.policy == "learned"
    assert result.summary["completed"] == 16
    assert policy.last_reason is None  # the network decided, no fallback


def test_the_learned_decisions_pass_the_checker_round_after_round(trained: Path) -> None:
    cluster = load_cluster("a100-4x8")
    loop = EventLoop(synthetic_trace(16, cluster, load=1.5, seed=101), cluster, SimConfig(seed=1))
    policy = LearnedPolicy(trained)
    pending = loop.advance()
    rounds = 0
    while pending is not None:
        decision = policy.decide(pending.instance)
        assert decision.status is Status.FEASIBLE and decision.stats["fallback"] == 0
        assert check(pending.instance, decision) == []
        loop.apply(decision)
        pending = loop.advance()
        rounds += 1
    assert rounds > 3


def test_a_missing_checkpoint_falls_back_to_wspt(tmp_path, monkeypatch) -> None:
    instance, _ = a_round()
    policy = LearnedPolicy(tmp_path / "absent.zip")
    assert_fallback(policy.decide(instance), instance, 1)
    assert policy.last_reason is not None and "absent.zip" in policy.last_reason
    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path / "other.zip"))
    from_registry = get_policy("learned")
    assert isinstance(from_registry, LearnedPolicy)
    assert from_registry.checkpoint == tmp_path / "other.zip"


def test_an_unreadable_checkpoint_falls_back(tmp_path) -> None:
    pytest.importorskip("sb3_contrib")  # without it the reason is "not installed"
    instance, _ = a_round()
    bad = tmp_path / "model.zip"
    bad.write_text("not a zip")
    assert_fallback(LearnedPolicy(bad).decide(instance), instance, 1)


def test_an_illegal_action_falls_back(tmp_path) -> None:
    instance, encoding = a_round()

    def forbidden(obs: np.ndarray, mask: np.ndarray) -> int:
        return int(np.flatnonzero(~mask)[0])

    policy = LearnedPolicy(agent=forbidden, encoding=encoding)
    assert_fallback(policy.decide(instance), instance, 4)
    out_of_range = LearnedPolicy(agent=lambda obs, mask: len(mask), encoding=encoding)
    assert_fallback(out_of_range.decide(instance), instance, 4)


def test_a_failing_network_falls_back() -> None:
    instance, encoding = a_round()

    def broken(obs: np.ndarray, mask: np.ndarray) -> int:
        raise RuntimeError("NaN in the logits")

    policy = LearnedPolicy(agent=broken, encoding=encoding)
    assert_fallback(policy.decide(instance), instance, 7)
    assert "NaN" in (policy.last_reason or "")


def test_a_slow_network_falls_back_on_the_time_limit() -> None:
    instance, encoding = a_round()

    def slow(obs: np.ndarray, mask: np.ndarray) -> int:
        time.sleep(0.02)
        return int(np.flatnonzero(mask)[0])

    policy = LearnedPolicy(agent=slow, encoding=encoding)
    decision = policy.decide(instance, SolveOptions(time_limit_s=0.01))
    assert_fallback(decision, instance, 6)


def test_a_checkpoint_for_another_cluster_falls_back() -> None:
    instance, encoding = a_round()
    other = replace(encoding, gpu_types=("A100-80G",))
    first_legal = LearnedPolicy(agent=lambda o, m: int(np.flatnonzero(m)[0]), encoding=other)
    assert_fallback(first_legal.decide(instance), instance, 3)


def test_a_decision_the_checker_rejects_falls_back(monkeypatch) -> None:
    instance, encoding = a_round()
    monkeypatch.setattr("whale_opt.policies.learned.check", lambda i, d: ["a broken rule"])
    policy = LearnedPolicy(agent=lambda o, m: int(np.flatnonzero(m)[0]), encoding=encoding)
    assert_fallback(policy.decide(instance), instance, 5)
    assert set(FALLBACK_REASONS) == {1, 2, 3, 4, 5, 6, 7}


@pytest.mark.parametrize("seed", range(4))
def test_any_legal_agent_yields_checked_decisions(seed: int) -> None:
    """Whatever legal picks a network makes, the policy's decision is valid and
    starts exactly the picks."""
    instance, encoding = a_round({"queue_order": "smith", "work_conserving": True})
    rng = np.random.default_rng(seed)

    def random_agent(obs: np.ndarray, mask: np.ndarray) -> int:
        assert obs.shape == (GpuClusterEnv(synthetic_config()).layout.size,)
        return int(rng.choice(np.flatnonzero(mask)))

    decision = LearnedPolicy(agent=random_agent, encoding=encoding).decide(instance)
    assert decision.status is Status.FEASIBLE
    assert check(instance, decision) == []
    assert decision.stats["picks"] == len([j for j in decision.jobs if j.action == "start"])


def test_smith_order_shows_the_wspt_order_first() -> None:
    instance, encoding = a_round()
    smith = PartialRound(instance, replace(encoding, queue_order="smith"))
    assert smith.waiting == wspt_order(instance)
    work_conserving = PartialRound(instance, replace(encoding, work_conserving=True))
    mask = work_conserving.mask(encoding.slots)
    assert mask[:-1].any() and not mask[-1]
