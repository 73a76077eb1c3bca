"""Batches of arriving pods placed together: the Protocol, trial runs, cpsat rounds.

A :class:`BatchPackPolicy` gets the next ``batch_size`` arriving pods at once
and returns a placement (or None: dropped) for each; the experiment applies
them in arrival order, then offers the next batch. Nothing placed before the
batch moves.

:class:`CpsatBatchPolicy` (``cpsat-b1``, ``cpsat-b16``, ``cpsat-b64``,
``cpsat-b256``) runs two greedy policies on the batch first, one pod at a
time in arrival order: ``frag-aware`` (the anchor, whose choices the model
keeps when they cost nothing) and FGD. When the anchor places every pod that
fits anywhere, that is the batch's answer: no placement can add GPU request,
and the model's second term (keep the anchor's choices) is at its best.
Otherwise the CP-SAT model of :mod:`whale_opt.pack.batch_model` places the
batch, hinted with the better of the two greedy runs, so it never places
less GPU request than FGD on the same batch (a solve that finds less, or
nothing, falls back to that greedy run). Last, every dropped pod that still
fits after the batch's placements is offered to the anchor, in arrival order,
so no pod is dropped that the cluster could still take.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from whale_opt.pack.batch_model import BatchModel, candidate_nodes
from whale_opt.pack.fgd import FgdPolicy
from whale_opt.pack.frag_aware import FragAwarePolicy
from whale_opt.pack.policies import PackPolicy
from whale_opt.pack.state import PackState, Placement, Pod

BATCH_SIZES = (1, 16, 64, 256)
CANDIDATES = 8  # nodes per pod in the model, besides the greedy runs' own choices
# deterministic-time budget of one batch's solve (about seconds on an idle core)
SECONDS_PER_POD = 0.01
MIN_SECONDS = 0.05

Decisions = list[Placement | None]


@runtime_checkable
class BatchPackPolicy(Protocol):
    """Anything with a ``name`` and a ``batch_size`` that places a batch of pods at once."""

    name: str
    batch_size: int

    def place_batch(
        self, state: PackState, pods: Sequence[Pod], rng: np.random.Generator
    ) -> Decisions:
        """A placement (or None: dropped) for each of ``pods``, all valid together on ``state``."""
        ...


def trial(
    state: PackState,
    pods: Sequence[Pod],
    policy: PackPolicy,
    rng: np.random.Generator,
    order: Iterable[int] | None = None,
) -> Decisions:
    """What ``policy`` does with ``pods`` one at a time (in ``order``); ``state`` is kept as is."""
    out: Decisions = [None] * len(pods)
    done: list[tuple[int, Placement]] = []
    try:
        for i in range(len(pods)) if order is None else order:
            placement = policy.place(state, pods[i], rng)
            if placement is not None:
                state.place(pods[i], placement)
                out[i] = placement
                done.append((i, placement))
    finally:
        for i, placement in reversed(done):
            state.unplace(pods[i], placement)
    return out


def placed_request(pods: Sequence[Pod], decisions: Decisions) -> int:
    """GPU milli of the pods that ``decisions`` places."""
    return sum(p.gpu_request for p, d in zip(pods, decisions, strict=True) if d is not None)


@dataclass
class BatchLog:
    """What a cpsat policy did over a run: batches, solves and the request they added."""

    batches: int = 0
    solves: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    gained_milli: int = 0  # GPU request placed beyond the better greedy run
    filled: int = 0  # dropped pods placed afterwards because they still fit


class CpsatBatchPolicy:
    """CP-SAT rounds of ``batch_size`` pods (see the module docstring)."""

    def __init__(
        self,
        anchor: FragAwarePolicy,
        fgd: FgdPolicy,
        batch_size: int,
        seconds: float | None = None,
        candidates: int = CANDIDATES,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.name = f"cpsat-b{batch_size}"
        self.batch_size = batch_size
        self.seconds = (
            seconds if seconds is not None else max(MIN_SECONDS, SECONDS_PER_POD * batch_size)
        )
        self.candidates = candidates
        self.anchor = anchor
        self.fgd = fgd
        self.log = BatchLog()

    def place_batch(
        self, state: PackState, pods: Sequence[Pod], rng: np.random.Generator
    ) -> Decisions:
        """See the module docstring."""
        self.log.batches += 1
        fitting = [i for i, pod in enumerate(pods) if state.feasible(pod).any()]
        batch = [pods[i] for i in fitting]
        anchor = trial(state, batch, self.anchor, rng)
        chosen = anchor
        if any(d is None for d in anchor):
            fgd = trial(state, batch, self.fgd, rng)
            hint = anchor if placed_request(batch, anchor) >= placed_request(batch, fgd) else fgd
            chosen = self._solve(state, batch, hint, (anchor, fgd))
            chosen = self._fill(state, batch, chosen, rng)
        out: Decisions = [None] * len(pods)
        for i, decision in zip(fitting, chosen, strict=True):
            out[i] = decision
        return out

    def _solve(
        self, state: PackState, batch: list[Pod], hint: Decisions, greedy: Sequence[Decisions]
    ) -> Decisions:
        """The model's placements, or ``hint`` if the solve places less GPU request."""
        nodes = candidate_nodes(state, batch, self.fgd, self.anchor, self.candidates, greedy)
        model = BatchModel(state, batch, nodes, self.fgd, hint)
        result = model.solve(self.seconds)
        self.log.solves += 1
        self.log.statuses[result.status] = self.log.statuses.get(result.status, 0) + 1
        before = placed_request(batch, hint)
        if result.decisions is None or placed_request(batch, result.decisions) < before:
            return hint
        self.log.gained_milli += placed_request(batch, result.decisions) - before
        return result.decisions

    def _fill(
        self, state: PackState, batch: list[Pod], chosen: Decisions, rng: np.random.Generator
    ) -> Decisions:
        """``chosen``, plus the anchor's place for each dropped pod that still fits."""
        done = [(i, d) for i, d in enumerate(chosen) if d is not None]
        dropped = [i for i, d in enumerate(chosen) if d is None]
        for i, placement in done:
            state.place(batch[i], placement)
        try:
            extra = trial(state, batch, self.anchor, rng, order=dropped)
        finally:
            for i, placement in reversed(done):
                state.unplace(batch[i], placement)
        out = list(chosen)
        for i in dropped:
            if extra[i] is not None:
                out[i] = extra[i]
                self.log.filled += 1
        return out
