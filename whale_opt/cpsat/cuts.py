"""Redundant linear cuts: mean busy times against the GPU capacity the jobs share.

CP-SAT's linear relaxation of a weighted-completion objective over
cumulatives is weak: it lets every job start at 0. These cuts give it what
the flow bound (:mod:`whale_opt.bounds`) knows, in a form its LP uses.

A job on ``g`` GPUs of a type for ``d`` seconds from ``start`` does ``e = g*d``
GPU-seconds of work at a constant rate, so its work's mean busy time is
``M = start + d/2``. Jobs that share a free capacity ``c(t)`` (the type's
GPUs on their candidate nodes, minus what the fixed jobs use) process at most
``c(t)`` work per second together, so for any set ``S`` of them::

    sum_{j in S} e_j * M_j  >=  F(E(S)),   E(S) = sum_{j in S} e_j,

where ``F(E)`` is the least ``integral t * r(t) dt`` of any rate ``r <= c``
doing ``E`` work: the earliest capacity filled first (the cumulative form of
Queyranne's single-machine inequalities). ``F`` is convex, with slope
``T(E)``, the time the filling ends; so a job of ``S`` that does not run on
the capacity (another type, or deferred) may enter with ``M_j = X >= T(E(S))``
and the inequality stays valid. Work is rounded down, which keeps it valid
too (a uniform fraction of a job's work has the same mean busy time).

Three families, each over the prefixes of the jobs in Smith order (weight
per work, heaviest first: the sets an LP optimum makes tight):

- per GPU type, over the jobs that may run on it;
- per GPU type and piece size ``g`` that some job takes whole on a node: the
  capacity is ``sum_n floor(free_n(t) / g)`` (eight GPUs free on eight nodes
  hold no 8-GPU job), a job ``floor(GPUs per node / g)`` pieces a node
  (``floor`` is superadditive, so jobs sharing a node never hold more);
- pooled over every type, work weighted by the type's speed, each job's work
  its least over its types (when the jobs span two types or more).

Shares and CPU-only jobs are left out (leaving a job out keeps a cut valid),
and so are victims: their GPUs count as free.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from whale_opt.bounds import Capacity, slots
from whale_opt.cpsat.candidates import FreeJob
from whale_opt.cpsat.variables import JobVars
from whale_opt.placement.profile import Profile

Entry = tuple[float, float, cp_model.LinearExpr, cp_model.LinearExpr]
"""A job in a cut: weight, work (GPU-seconds, or pieces x seconds), twice its mean
busy time when on the capacity, and the literal (or sum) that it is."""

WORK_STEPS = 4096  # the largest job's work in cut units: coefficients stay small
ALL_PREFIXES = 24  # every prefix up to this size, then sizes growing by a quarter


def prefix_sizes(n: int) -> list[int]:
    """Every size up to :data:`ALL_PREFIXES`, then growing by a quarter, and ``n``."""
    sizes = list(range(1, min(n, ALL_PREFIXES) + 1))
    while sizes and sizes[-1] < n:
        sizes.append(min(n, max(sizes[-1] + 1, math.ceil(sizes[-1] * 1.25))))
    return sizes


def add_cuts(
    model: cp_model.CpModel,
    capacity: Capacity,
    jobs: list[Entry],
) -> int:
    """Add the prefix cuts of ``jobs``: (weight, work in GPU-seconds, twice the mean
    busy time when on the capacity, literal that it is), Smith order. Returns
    how many were added."""
    jobs = [job for job in jobs if job[1] > 0]
    if not jobs:
        return 0
    unit = max(job[1] for job in jobs) / WORK_STEPS
    order = sorted(jobs, key=lambda job: -job[0] / job[1])
    works = [math.floor(job[1] / unit) for job in order]
    added = 0
    for size in prefix_sizes(len(order)):
        total = sum(works[:size])
        if total <= 0:
            continue
        area, until = capacity.fill(total * unit)
        if not math.isfinite(area):
            continue
        phantom = math.ceil(2 * until)
        rhs = math.floor(2 * area / unit * (1 - 1e-9))
        terms = [
            work * (twice + phantom * (1 - on))
            for work, (_, _, twice, on) in zip(works[:size], order[:size], strict=True)
            if work
        ]
        model.add(sum(terms) >= rhs)
        added += 1
    return added


Shape = tuple[int, int]  # (GPUs on each node, nodes); a job spread GPU by GPU is (1, GPUs)


def mean_busy_time_cuts(
    model: cp_model.CpModel,
    pairs: list[tuple[FreeJob, JobVars]],
    nodes: dict[str, list[tuple[Profile, int]]],
    speeds: dict[str, float],
    weights: dict[int, float],
    shapes: dict[int, Shape],
) -> int:
    """The cuts (module docstring) for the freed jobs ``pairs`` of ``shapes`` (by
    queue position; others left out), with ``weights`` by queue position.

    ``nodes[type]``: per candidate node of the type, the GPUs the fixed jobs use
    over time and its healthy GPUs. Per type, one family per piece size ``g``
    some job takes on a node whole: capacity ``sum_n floor(free_n / g)``, a job
    ``floor(per node / g) * nodes`` pieces (``g = 1``: GPUs, every job).
    Returns how many cuts were added.
    """
    kept = [(item, v) for item, v in pairs if item.position in shapes]
    added = 0
    for p, candidates in nodes.items():
        mine = [(item, v) for item, v in kept if p in item.durations and p in v.on_type]
        for size in sorted({1} | {shapes[item.position][0] for item, _ in mine}):
            jobs: list[Entry] = []
            for item, v in mine:
                per_node, count = shapes[item.position]
                pieces = per_node // size * count
                d = item.durations[p]
                if pieces:
                    twice = 2 * v.start + d * v.on_type[p]
                    jobs.append((weights[item.position], pieces * d, twice, v.on_type[p]))
            if len(jobs) > 1 or size == 1:
                added += add_cuts(model, slots(candidates, size), jobs)
    types = [p for p in nodes if any(p in v.on_type for _, v in kept)]
    if len(types) < 2:
        return added
    everywhere = [node for p in types for node in nodes[p]]
    capacity = slots(everywhere, 1, [speeds[p] for p in types for _ in nodes[p]])
    jobs = []
    for item, v in kept:
        on = {p: lit for p, lit in v.on_type.items() if p in nodes}
        if not on:
            continue
        gpus = shapes[item.position][0] * shapes[item.position][1]
        work = min(gpus * item.durations[p] * speeds[p] for p in on)
        twice = 2 * v.start + sum(item.durations[p] * lit for p, lit in on.items())
        placed = cp_model.LinearExpr.sum(list(on.values()))
        jobs.append((weights[item.position], work, twice, placed))
    return added + add_cuts(model, capacity, jobs)
