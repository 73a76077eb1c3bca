"""A Gymnasium environment over the simulator's event loop: the agent schedules the rounds.

Each episode replays a trace on a cluster (:class:`~whale_opt.gym.config.GymConfig`)
with :class:`~whale_opt.sim.EventLoop`. At each round the agent builds the
round's decision one start at a time, then advances:

- action ``slot x C + c`` (slot < K, c < C): start the job shown in ``slot``
  (the head of the queue not picked yet, in ``queue_order``) on its candidate ``c``
  (:mod:`whale_opt.gym.partial`): the start joins the round's decision and
  the GPUs it takes are busy in the next observation; reward 0;
- action ``K x C`` ("advance"): close the round (the picks start, every
  other queued job is deferred; the decision passes the public checker),
  let the simulator run to the next round, and pay for the time that passed:
  reward = -(sum over jobs in the system of weight x seconds) / (the trace's
  total weight) x ``reward_scale`` (:mod:`whale_opt.gym.reward`). An episode
  in which every job completes returns minus the run's ``weighted_jct_s``.

With ``auto_advance`` (off by default) the agent is never asked when advancing
is all it could do (no shown job can start): the environment advances
itself, so a step runs on to the next round that offers a choice (a pick
that leaves nothing else to start closes its round too), and its reward
covers all the time in between.

:meth:`GpuClusterEnv.action_masks` (the sb3-contrib ``MaskablePPO``
convention) and ``info["action_mask"]`` mark the legal actions (with
``work_conserving``, advancing is legal only once no shown job can start). An
illegal one is rejected (nothing changes, reward 0, ``info["illegal_action"]``) or
raises ValueError (``illegal_action="raise"``).

The episode terminates when the run is over (every job done, or nothing more
can happen) and is truncated when the simulator's ``end_s`` or
``max_rounds`` cut it short. Seeding: ``reset(seed=s)`` seeds the
environment's generator, which draws each episode's seed (the synthetic
trace's and the simulator's noise and failures); the same seed and actions
give the same episode. The finished run's metrics: :meth:`GpuClusterEnv.result`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from whale_opt.decision import Decision
from whale_opt.gym.config import GymConfig
from whale_opt.gym.observe import Layout, observation_space
from whale_opt.gym.partial import PartialRound
from whale_opt.gym.reward import WaitMeter
from whale_opt.problem_data import Instance
from whale_opt.sim import EventLoop, PendingRound, SimResult, TraceJob, synthetic_trace
from whale_opt.sim.metrics import build_result

ENV_ID = "whale_opt/GpuCluster-v0"


class GpuClusterEnv(gym.Env[np.ndarray, np.int64]):
    """The scheduling rounds of a simulated GPU cluster as a Gymnasium environment.

    Parameters
    ----------
    config
        The episode settings (default :class:`GymConfig` ()).
    **overrides
        Fields of :class:`GymConfig` replacing ``config``'s (what
        ``gymnasium.make(ENV_ID, n_jobs=32, ...)`` passes).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: GymConfig | None = None, **overrides: Any) -> None:
        config = config or GymConfig()
        self.config = replace(config, **overrides) if overrides else config
        self.cluster = self.config.load_cluster()
        self.trace = self.config.load_trace()
        self.encoding = self.config.encoding(self.cluster)
        self.layout = Layout(self.encoding)
        self.types = self.layout.types
        self.width = self.encoding.width
        self.advance_action = self.config.queue_slots * self.width
        self.action_space: spaces.Discrete = spaces.Discrete(self.advance_action + 1)
        self.observation_space: spaces.Box = observation_space(self.layout)
        self.loop: EventLoop | None = None
        self.partial: PartialRound | None = None
        self._pending: PendingRound | None = None
        self.last_decision: Decision | None = None
        self.last_instance: Instance | None = None
        self._meter: WaitMeter | None = None
        self._charged = 0.0
        self._mask = np.zeros(self.advance_action + 1, dtype=bool)
        self._nodes: np.ndarray | None = None  # node rows of the round, built when observed
        self._jobs: dict[int, np.ndarray] = {}
        self._obs = np.zeros(self.layout.size, dtype=np.float32)
        self._started = 0.0
        # The episode's seed and trace: simulate(episode_trace, cluster, sim with
        # seed=episode_seed) replays the same run under a policy, for baselines.
        self.episode_seed = 0
        self.episode_trace: tuple[TraceJob, ...] = ()

    # -- the Gymnasium API ---------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: a new event loop, run to its first round."""
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(2**31 - 1))
        trace = self.trace
        if trace is None:
            config = self.config
            trace = synthetic_trace(
                config.n_jobs,
                self.cluster,
                load=config.load,
                seed=episode_seed,
                median_duration_s=config.median_duration_s,
            )
        self.episode_seed, self.episode_trace = episode_seed, trace
        self.loop = EventLoop(trace, self.cluster, replace(self.config.sim, seed=episode_seed))
        self._meter = WaitMeter(self.loop.jobs)
        self._charged = 0.0
        self.last_decision = self.last_instance = None
        self._started = time.perf_counter()
        self._run_to_choice(self.loop.advance())
        return self._observe(), self._info(False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Pick a start, or advance to the next round (see the module docstring)."""
        if self.loop is None:
            raise RuntimeError("call reset() before step()")
        if self.partial is None:
            raise RuntimeError("the episode is over: call reset()")
        chosen = int(action)
        if not (0 <= chosen <= self.advance_action and self._mask[chosen]):
            if self.config.illegal_action == "raise":
                raise ValueError(f"action {chosen} is not legal now (see action_masks())")
            return self._obs.copy(), 0.0, False, False, self._info(True)
        if chosen == self.advance_action:
            return self._advance()
        partial = self.partial
        _, placement = partial.commit(chosen // self.width, chosen % self.width)
        if self._nodes is not None:
            self.layout.update_nodes(self._nodes, partial, placement.nodes)
        self._mask = partial.mask(self.config.queue_slots)
        if self.config.auto_advance and not self._mask[:-1].any():
            return self._advance()  # nothing else can start: the round is decided
        return self._observe(), 0.0, False, False, self._info(False)

    def action_masks(self) -> np.ndarray:
        """Which actions are legal now (bool, one per action; advance last)."""
        return self._mask.copy()

    # -- what else a user reads ------------------------------------------------------

    def result(self) -> SimResult:
        """The run's metrics (:class:`~whale_opt.sim.SimResult`) so far; final once over."""
        if self.loop is None:
            raise RuntimeError("call reset() first")
        return build_result(self.loop.record, time.perf_counter() - self._started)

    @property
    def pending(self) -> PendingRound | None:
        """The round the agent is deciding (None once the episode is over)."""
        return self._pending

    # -- the rounds ------------------------------------------------------------------

    def _advance(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Close the round, run to the next one that offers a choice, charge the time."""
        assert self.loop is not None and self._meter is not None
        self._close_round()
        self._run_to_choice(self.loop.advance())
        if self._pending is None:
            cost = self._meter.final_cost(self.loop.record.end_s)
        else:
            cost = self._meter.cost_at(self._pending.now)
        reward = -(cost - self._charged) / self._meter.total_weight * self.config.reward_scale
        self._charged = cost
        truncated = self.partial is None and self._cut_short()
        terminated = self.partial is None and not truncated
        return self._observe(), float(reward), terminated, truncated, self._info(False)

    def _close_round(self) -> None:
        """Apply the round's decision (``last_decision``, on ``last_instance``)."""
        assert self.loop is not None and self.partial is not None
        self.last_decision, self.last_instance = self.partial.decision(), self.partial.instance
        self.loop.apply(self.last_decision)

    def _run_to_choice(self, pending: PendingRound | None) -> None:
        """Set up round ``pending``; with ``auto_advance``, close every round in which
        no shown job can start (advancing is all there is to do) and go on."""
        assert self.loop is not None
        self._next_round(pending)
        while self.config.auto_advance and self.partial is not None and not self._mask[:-1].any():
            self._close_round()
            self._next_round(self.loop.advance())

    def _next_round(self, pending: PendingRound | None) -> None:
        """Set up the round ``pending`` and its mask (None: the run is over)."""
        assert self._meter is not None
        self._jobs.clear()
        self._pending = pending
        if pending is None:
            self.partial = None
            self._mask[:] = False
            self._mask[-1] = True
            return
        self._meter.update(pending.changes)
        self.partial = PartialRound(pending.instance, self.encoding)
        self._mask = self.partial.mask(self.config.queue_slots)
        self._nodes = None

    def _observe(self) -> np.ndarray:
        """The observation of the round as the picks left it (a new array)."""
        partial = self.partial
        if partial is None:
            self._obs = np.zeros(self.layout.size, dtype=np.float32)
            return self._obs.copy()
        if self._nodes is None:
            self._nodes = self.layout.node_rows(partial)
        slots = self.config.queue_slots
        rows = []
        for position in partial.waiting[:slots]:
            row = self._jobs.get(position)
            if row is None:
                row = self._jobs[position] = self.layout.job_row(partial.instance, position)
            rows.append(row)
        self._obs = self.layout.observe(self._nodes, rows, self.layout.totals(partial))
        return self._obs.copy()

    def _cut_short(self) -> bool:
        """Whether the run ended on ``end_s`` or ``max_rounds`` with jobs unfinished."""
        assert self.loop is not None
        sim = self.loop.config
        if all(run.end is not None for run in self.loop.jobs.values()):
            return False
        rounds_out = sim.max_rounds is not None and self.loop.state.rounds >= sim.max_rounds
        time_out = sim.end_s is not None and self.loop.now >= sim.end_s
        return rounds_out or time_out

    def _info(self, illegal: bool) -> dict[str, Any]:
        loop = self.loop
        assert loop is not None
        partial = self.partial
        return {
            "action_mask": self._mask.copy(),
            "illegal_action": illegal,
            "now": loop.now,
            "rounds": loop.state.rounds,
            "queued": len(partial.waiting) if partial is not None else 0,
            "picked": len(partial.picked) if partial is not None else 0,
        }
