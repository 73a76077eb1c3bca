"""The environment's contract: Gymnasium's checker, registration, seeding, masks, the
return against the simulator's weighted JCT, and checked decisions."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from whale_opt.check import check  # noqa: E402
from whale_opt.decision import Action, Decision  # noqa: E402
from whale_opt.gym import ENV_ID, GpuClusterEnv, GymConfig  # noqa: E402
from whale_opt.problem_data import FieldError  # noqa: E402
from whale_opt.sim import (  # noqa: E402
    EventLoop,
    SimConfig,
    simulate,
    synthetic_trace,
    write_trace,
)

from .conftest import SMALL, random_legal, small_config, synthetic_config  # noqa: E402


def rollout(env: GpuClusterEnv, seed: int, agent_seed: int) -> list[tuple]:
    """One episode under the random legal agent: (obs, reward, mask) per step."""
    obs, info = env.reset(seed=seed)
    seen = [(obs, 0.0, info["action_mask"])]
    for action in random_legal(env, agent_seed):
        obs, reward, terminated, truncated, info = env.step(action)
        seen.append((obs, reward, info["action_mask"]))
        if terminated or truncated:
            return seen
    raise AssertionError("unreachable")


def test_gymnasium_env_checker_passes(config: GymConfig) -> None:
    env = GpuClusterEnv(config)
    check_env(env, skip_render_check=True)
    assert env.observation_space.shape == (env.layout.size,)
    assert env.action_space.n == config.queue_slots * env.width + 1


def test_registered_under_its_id() -> None:
    env = gymnasium.make(ENV_ID, n_jobs=6, queue_slots=3)
    assert env.spec is not None and env.spec.id == "whale_opt/GpuCluster-v0"
    inner = env.unwrapped
    assert isinstance(inner, GpuClusterEnv)
    assert inner.config.n_jobs == 6 and inner.config.queue_slots == 3
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info["action_mask"].shape == (env.action_space.n,)
    again = gymnasium.make("whale_opt.gym:whale_opt/GpuCluster-v0")
    assert isinstance(again.unwrapped, GpuClusterEnv)


def test_same_seed_same_episode_other_seed_another(config: GymConfig) -> None:
    first = rollout(GpuClusterEnv(config), seed=11, agent_seed=5)
    second = rollout(GpuClusterEnv(config), seed=11, agent_seed=5)
    assert len(first) == len(second) > 2
    for (obs_a, reward_a, mask_a), (obs_b, reward_b, mask_b) in zip(first, second, strict=True):
        assert np.array_equal(obs_a, obs_b)
        assert reward_a == reward_b
        assert np.array_equal(mask_a, mask_b)
    if config.trace is None:  # a fresh synthetic trace per seed
        other = rollout(GpuClusterEnv(config), seed=12, agent_seed=5)
        assert len(other) != len(first) or any(
            not np.array_equal(a[0], b[0]) for a, b in zip(first, other, strict=True)
        )


def test_the_mask_is_exactly_the_legal_actions(config: GymConfig) -> None:
    """Every shown job's candidates, searched afresh, are what the mask allows; each
    allowed pick leaves a decision the checker accepts; advancing is refused only
    while the cluster would idle with startable work; a forbidden action changes
    nothing."""
    env = GpuClusterEnv(config)
    env.reset(seed=3)
    slots, width = config.queue_slots, env.width
    steps = 0
    for action in random_legal(env, 8):
        partial = env.partial
        assert partial is not None
        mask = env.action_masks()
        expected = np.zeros_like(mask)
        for slot, position in enumerate(partial.waiting[:slots]):
            fresh = partial.fresh_candidates(position)
            assert partial.candidates(position) == fresh  # the cache is never stale
            expected[slot * width : (slot + 1) * width] = [p is not None for p in fresh]
        idle = not partial.instance.running and not partial.picked
        expected[-1] = not ((idle or config.work_conserving) and expected[:-1].any())
        assert np.array_equal(mask, expected)
        if config.auto_advance:  # the agent is never asked when it can only advance
            assert expected[:-1].any()
        assert check(partial.instance, partial.decision()) == []
        if steps % 3 == 0:
            before = env._obs.copy()
            for illegal in np.flatnonzero(~mask)[:5]:
                obs, reward, terminated, truncated, info = env.step(int(illegal))
                assert info["illegal_action"] and reward == 0.0
                assert not terminated and not truncated
                assert np.array_equal(obs, before)
                assert np.array_equal(env.action_masks(), mask)
        _, _, terminated, truncated, _ = env.step(action)
        steps += 1
        if terminated or truncated:
            break
    assert steps > 5


def test_an_illegal_action_raises_when_asked() -> None:
    env = GpuClusterEnv(synthetic_config(illegal_action="raise"))
    env.reset(seed=0)
    illegal = np.flatnonzero(~env.action_masks())
    assert illegal.size
    with pytest.raises(ValueError, match="not legal"):
        env.step(int(illegal[0]))
    with pytest.raises(ValueError, match="not legal"):
        env.step(env.action_space.n)  # out of range


def test_a_pick_takes_its_gpus_in_the_observation() -> None:
    env = GpuClusterEnv(synthetic_config(auto_advance=False))  # stay in the round
    obs, info = env.reset(seed=1)
    layout = env.layout
    picks = np.flatnonzero(info["action_mask"][:-1])
    assert picks.size
    action = int(picks[0])
    partial = env.partial
    assert partial is not None
    position = partial.waiting[action // env.width]
    gpus = partial.instance.queue[position].gpu_count
    placement = partial.candidates(position)[action % env.width]
    assert placement is not None
    after, reward, *_ = env.step(action)
    assert reward == 0.0  # no time passes within a round
    node = placement.nodes[0]
    column = node * layout.node_width + partial.node_type[node]
    taken = (obs[column] - after[column]) * layout.scale
    assert math.isclose(taken, placement.counts[0], abs_tol=1e-4)
    assert gpus == sum(placement.counts)
    assert partial.picked == {position: placement}


def test_the_return_is_minus_the_simulators_weighted_jct(
    config: GymConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full run: the rewards add up to -weighted_jct_s of the run's own metrics,
    and every decision the environment applied passes the checker."""
    env = GpuClusterEnv(config)
    applied: list[Decision] = []
    apply = EventLoop.apply

    def checked(loop: EventLoop, decision: Decision, **kwargs: object) -> None:
        assert decision is env.last_decision and env.last_instance is not None
        assert check(env.last_instance, decision) == []
        applied.append(decision)
        apply(loop, decision, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(EventLoop, "apply", checked)
    env.reset(seed=4)
    total = 0.0
    for action in random_legal(env, 2):
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        if terminated or truncated:
            break
    assert terminated and not truncated
    summary = env.result().summary
    assert summary["completed"] == summary["jobs"]
    assert len(applied) == summary["rounds"]
    # the same run under a policy: the episode's trace and seed reproduce its arrivals
    monkeypatch.undo()
    baseline = simulate(env.episode_trace, env.cluster, replace(config.sim, seed=env.episode_seed))
    assert baseline.summary["jobs"] == summary["jobs"]
    assert baseline.summary["completed"] == summary["jobs"]
    started = sum(len(d.by_action(Action.START)) for d in applied)
    assert started == summary["jobs"]  # no failures here: each job starts once
    assert {d.solver for d in applied} == {"gym-agent"}
    assert total == pytest.approx(-summary["weighted_jct_s"], rel=1e-9)
    with pytest.raises(RuntimeError, match="over"):
        env.step(env.advance_action)


def test_reward_scale_scales_every_reward() -> None:
    plain = rollout(GpuClusterEnv(synthetic_config()), seed=2, agent_seed=1)
    hours = rollout(GpuClusterEnv(synthetic_config(reward_scale=1 / 3600)), seed=2, agent_seed=1)
    assert [r / 3600 for _, r, _ in plain] == pytest.approx([r for _, r, _ in hours])


def test_max_rounds_truncates() -> None:
    env = GpuClusterEnv(synthetic_config(sim=SimConfig(max_rounds=3, check_decisions=True)))
    env.reset(seed=0)
    for _ in range(1000):
        legal = np.flatnonzero(env.action_masks())
        _, _, terminated, truncated, _ = env.step(int(legal[-1]))  # advance when legal
        if terminated or truncated:
            break
    assert truncated and not terminated
    summary = env.result().summary
    assert summary["rounds"] == 3 and summary["completed"] < summary["jobs"]


def test_cluster_and_trace_from_files(tmp_path) -> None:
    path = tmp_path / "jobs.csv"
    write_trace(path, synthetic_trace(5, small_config().load_cluster(), seed=2))
    env = GpuClusterEnv(GymConfig(cluster=SMALL, trace=path, queue_slots=2))
    assert env.cluster.queue == () and len(env.cluster.nodes) == 5
    assert len(env.trace or ()) == 5
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(FieldError, match="queue_slots"):
        GymConfig(queue_slots=0)
    with pytest.raises(FieldError, match="preferences"):
        GymConfig(preferences=("end", "nearest"))
    with pytest.raises(FieldError, match="illegal_action"):
        GymConfig(illegal_action="ignore")
    with pytest.raises(ValueError, match="max_nodes"):
        GpuClusterEnv(small_config(max_nodes=2))
    padded = GpuClusterEnv(small_config(max_nodes=9))
    obs, _ = padded.reset(seed=0)
    rows = obs[: 9 * padded.layout.node_width].reshape(9, -1)
    assert rows[5:].sum() == 0 and rows[:5, -2].min() > 0  # padding, then healthy GPUs
