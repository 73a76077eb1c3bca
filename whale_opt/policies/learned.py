"""The learned policy: a trained network picks the round's starts, the checker guards them.

A round is built one start at a time, as in the Gymnasium environment
(:mod:`whale_opt.gym`, which trains the network), with the encoding both
share (:mod:`whale_opt.policies.learned_encoding`): the network picks a
shown job and one of its candidates (or stops) until the round is decided.

:class:`LearnedPolicy` loads a checkpoint written by ``whale-opt train`` (an
sb3-contrib ``MaskablePPO`` zip and its encoding beside it as JSON). Its
path: the constructor's ``checkpoint``, else the ``WHALE_OPT_LEARNED``
environment variable, else ``runs/learned/model.zip`` (``whale-opt train``'s
default output). Every decision goes through :func:`whale_opt.check.check`.
When the checkpoint is missing or unreadable, torch or sb3-contrib is not
installed, the checkpoint was trained on other GPU types or fewer nodes,
the network picks an action the mask forbids or fails, the round exceeds
its time limit, or the checker rejects the decision, the round is decided by
``wspt`` instead: status ``greedy-fallback``, ``stats["fallback"] = 1`` and
``stats["fallback_reason"]``, a code of :data:`FALLBACK_REASONS` (decision
stats are numbers); the reason's text is logged and kept in
:attr:`LearnedPolicy.last_reason`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from whale_opt.bounds import reported_bound
from whale_opt.check import check
from whale_opt.decision import Decision, Status
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.policies.learned_encoding import CAP as CAP
from whale_opt.policies.learned_encoding import DEFERRED_REASON as DEFERRED_REASON
from whale_opt.policies.learned_encoding import QUEUE_ORDERS as QUEUE_ORDERS
from whale_opt.policies.learned_encoding import Encoding as Encoding
from whale_opt.policies.learned_encoding import Layout as Layout
from whale_opt.policies.learned_encoding import PartialRound as PartialRound
from whale_opt.policies.protocol import SchedulingPolicy
from whale_opt.policies.wspt import WsptPolicy
from whale_opt.problem_data import Instance

log = logging.getLogger("whale_opt")

CHECKPOINT_ENV = "WHALE_OPT_LEARNED"
DEFAULT_CHECKPOINT = Path("runs") / "learned" / "model.zip"

#: ``stats["fallback_reason"]`` of a ``greedy-fallback`` decision -> what happened.
FALLBACK_REASONS = {
    1: "no checkpoint",
    2: "torch / sb3-contrib not installed",
    3: "the checkpoint does not fit this cluster",
    4: "the network picked an illegal action",
    5: "the checker rejected the decision",
    6: "the round ran past its time limit",
    7: "the network failed",
}

#: The network as the policy calls it: (observation, legal-action mask) -> action.
Agent = Callable[[np.ndarray, np.ndarray], int]


class _Fallback(Exception):
    """The learned round cannot stand: ``code`` of :data:`FALLBACK_REASONS`, and why."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{FALLBACK_REASONS[code]}: {detail}")
        self.code = code


def checkpoint_path(checkpoint: str | Path | None = None) -> Path:
    """Where the learned policy reads its network (see the module docstring)."""
    return Path(checkpoint or os.environ.get(CHECKPOINT_ENV) or DEFAULT_CHECKPOINT)


def encoding_path(checkpoint: Path) -> Path:
    """The JSON beside a checkpoint that holds its :class:`Encoding`."""
    return checkpoint.with_suffix(".json")


_LOADED: dict[tuple[str, float], tuple[Agent, Encoding]] = {}


def load_agent(checkpoint: Path) -> tuple[Agent, Encoding]:
    """The network of ``checkpoint`` as an :data:`Agent`, and its encoding (cached)."""
    if not checkpoint.is_file():
        raise _Fallback(1, f"{checkpoint} does not exist (whale-opt train writes it)")
    key = (str(checkpoint.resolve()), checkpoint.stat().st_mtime)
    if key in _LOADED:
        return _LOADED[key]
    try:
        from sb3_contrib import MaskablePPO
    except ImportError as exc:
        raise _Fallback(2, f"pip install 'whale-opt[rl]' ({exc})") from None
    try:
        encoding = Encoding.from_dict(json.loads(encoding_path(checkpoint).read_text()))
        model = MaskablePPO.load(checkpoint, device="cpu")
    except Exception as exc:  # any unreadable checkpoint is a fallback, not a crash
        raise _Fallback(1, f"{checkpoint} is unreadable: {exc}") from None

    def agent(obs: np.ndarray, mask: np.ndarray) -> int:
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        return int(action)

    _LOADED[key] = (agent, encoding)
    return agent, encoding


class LearnedPolicy:
    """A trained network's starts, checked, with ``wspt`` as the guardrail.

    Parameters
    ----------
    checkpoint
        The ``model.zip`` to load (see the module docstring for the default).
    agent, encoding
        A network to use instead of a checkpoint (tests, or a model in memory).
    fallback
        The policy that decides when the network's round cannot stand.
    """

    name = "learned"

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        *,
        agent: Agent | None = None,
        encoding: Encoding | None = None,
        fallback: SchedulingPolicy | None = None,
    ) -> None:
        if (agent is None) != (encoding is None):
            raise ValueError("give agent and encoding together, or neither")
        self.checkpoint = checkpoint_path(checkpoint)
        self._loaded = (agent, encoding) if agent is not None and encoding is not None else None
        self.fallback = fallback or WsptPolicy()
        self.last_reason: str | None = None
        self._logged: set[int] = set()

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        """The network's round (checked), or the fallback's with the reason."""
        try:
            agent, encoding = self._loaded or load_agent(self.checkpoint)
            misfit = encoding.misfit(instance)
            if misfit is not None:
                raise _Fallback(3, misfit)
            # the time limit is the round's, not the first round's model loading
            decision = self._rollout(instance, options, agent, encoding, time.perf_counter())
        except _Fallback as exc:
            return self._fall_back(instance, options, exc)
        self.last_reason = None
        return decision

    def _rollout(
        self,
        instance: Instance,
        options: SolveOptions,
        agent: Agent,
        encoding: Encoding,
        started: float,
    ) -> Decision:
        """Ask the network for starts until it advances or nothing else can start."""
        partial = PartialRound(instance, encoding)
        layout = Layout(encoding)
        deadline = started + options.time_limit_s
        steps = 0
        while True:
            mask = partial.mask(encoding.slots)
            if not mask[:-1].any():
                break  # nothing else can start: the round is decided
            obs = layout.observe_round(partial)
            try:
                action = agent(obs, mask)
            except Exception as exc:  # a broken network must not break the round
                raise _Fallback(7, repr(exc)) from None
            steps += 1
            if not (0 <= action < len(mask) and mask[action]):
                raise _Fallback(4, f"action {action} at step {steps}")
            if action == len(mask) - 1:
                break
            partial.commit(action // encoding.width, action % encoding.width)
            if time.perf_counter() > deadline:
                raise _Fallback(6, f"{options.time_limit_s:g} s after {steps} steps")
        decision = partial.decision(self.name, reported_bound(instance, options.report_bound))
        problems = check(instance, decision)
        if problems:
            raise _Fallback(5, "; ".join(str(p) for p in problems[:3]))
        stats = {"fallback": 0, "agent_steps": steps, "picks": len(partial.picked)}
        return decision.with_changes(
            wall_s=time.perf_counter() - started, stats={**decision.stats, **stats}
        )

    def _fall_back(self, instance: Instance, options: SolveOptions, why: _Fallback) -> Decision:
        """The fallback's decision, marked ``greedy-fallback`` with the reason."""
        self.last_reason = str(why)
        if why.code not in self._logged:  # once per reason, not every round
            self._logged.add(why.code)
            log.warning("learned policy falls back to %s: %s", self.fallback.name, why)
        decision = self.fallback.decide(instance, options)
        stats = {**decision.stats, "fallback": 1, "fallback_reason": why.code}
        return decision.with_changes(solver=self.name, status=Status.GREEDY_FALLBACK, stats=stats)
