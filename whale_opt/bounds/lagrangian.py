"""A Lagrangian lower bound: each job placed whole, at one start, against prices on capacity.

The analytic bounds (:mod:`whale_opt.bounds.analytic`) let work divide: a job
may trickle through the free GPUs of a type, so two 8-GPU jobs that want the
one node about to free both look as if they ended early. This bound keeps
each job whole and non-preemptive and relaxes only the capacity, into prices.

Time is cut into buckets (short at first, then growing). Job ``j`` on GPU type
``p`` starts in some bucket ``b``, never before its earliest start there
(:class:`~whale_opt.bounds.analytic.EarliestStarts`), and costs at least
``w_j * (lo + d_jp + r_jp)``, ``lo`` the earliest such start in the bucket and
``r_jp`` the soft-preference price every placement on ``p`` pays (off the
job's preferred types; no node of ``p`` in its zone). Whatever
its exact start in the bucket, it surely runs over ``[hi, lo + d_jp)``, ``hi``
the bucket's end: that interval is the use it is charged for. The capacity
comes in families, per type ``p`` and piece size ``s``: ``sum_n floor(free_n(t)
/ s)`` over the type's nodes (free: healthy GPUs less what the running jobs
that no queued job may preempt hold, a shared GPU whole, as the placement
search counts it), its integral over each bucket the
family's room there. A job takes ``g`` GPUs of family ``(p, 1)``; a job that
must sit on one node takes ``floor(g / s)`` pieces of each ``(p, s)``
(``floor`` is superadditive), a gang of whole ``S``-GPU nodes
``g / S * floor(S / s)``. A tenant with a GPU quota is a family of its own:
its room the quota less what its running jobs that stay hold, each of its
jobs taking ``g`` of it, on any type.

For prices ``lam >= 0`` on each family and bucket::

    L(lam) = sum_j min(deferred cost_j, min_{p, b} cost_j(p, b) + lam . use_j(p, b))
             - lam . room

is a lower bound on every valid decision's objective (weak duality: a
decision's jobs use at most the room, and pay at least their cost), for any
prices. Its best value is the optimum of the relaxation's linear program
(each job a convex mix of its choices and of being deferred, the room never
exceeded). A projected, deflected subgradient ascent (Polyak steps towards
the incumbent's value) raises it until it converges or its deadline; then,
when the LP is small enough to solve in the time left (GLOP, predicted from
its nonzeros), its dual prices are taken and ``L`` is evaluated at them: a
bound as valid as any other prices give, whatever GLOP's tolerances, and
the LP's optimum itself (measured to 1e-9). The ascent moves each bucket's
price for the whole bucket, by its overuse in GPUs (:func:`_ascend`): on
loaded 16- and 64-job rounds of 64-128 GPUs it comes within 0.2 points of the
LP's optimum. With time left once it has converged (or the LP is solved), the
prefix rows join it from those prices: per family and grid point ``g``, the
use each choice surely makes before ``g`` (it starts by ``hi`` whatever its
start in its bucket, so it has run ``[hi, hi + d_jp)`` clipped to ``g`` at
least), against the room before ``g``. A job shorter than its bucket has no sure interval there, so
only these rows count it: given 2 s, the bound on mixed 1,024-GPU rounds
rose from 24.6% below the greedy to 12.0% (``bench/ascent_panel.py``). At the
prices that gave the bound, each job's cheapest choice
is a start and a GPU type for it (:class:`Lagrangian`): the CP-SAT round
blends the order of those starts with the greedy's, holds jobs to those types
in some of the orders, and starts its order search from them too, when it has
the time. Shares and CPU-only jobs are left out (a job
left out of the capacity keeps the bound valid), as in the analytic bounds,
and so is an NVLink price (some placement may not pay it).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from ortools.linear_solver import linear_solver_pb2, pywraplp

from whale_opt import preferences
from whale_opt.bounds.analytic import earliest_starts, time_buckets, usage_floor
from whale_opt.bounds.capacity import Capacity, slots
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance, QueuedJob, tenant_quota
from whale_opt.topology import NodeTopology, single_node

FIRST_BUCKET_S = 20.0  # buckets this long at first, where most starts and contention are
BUCKET_GROWTH = 0.02  # then each bucket a fiftieth of its start time
MAX_OPTIONS = 400_000  # (job, type, start bucket) choices; buckets coarsen past this
STALLS = 5  # steps without a better bound after which the step halves
MIN_STEP = 1e-4  # the step's factor below which the ascent has converged
# Steps the ascent takes before its deadline may stop it (its wall still does). On
# Philly's rounds of 200-270 queued jobs (80-90k choices), a 0.5 s round's share
# of 0.05 s went to building the relaxation and left two steps: prices near 0, an
# order no better than the greedy's (-0.1% against -9.5% after 4-6 steps).
MIN_STEPS = 10
SAFETY = 1e-9  # the bound is shaded by this share against rounding
START_FACTOR = 1.0  # the first steps' factor on the Polyak step
# Each step goes along the subgradient plus this share of the last direction (a
# deflected subgradient, after Camerini, Fratta and Maffioli): it zig-zags less.
# Measured on 1,024-GPU rounds, 0.5-1 s: mean gap to the greedy 8.97% -> 7.82%
# (with the factor and stalls above, against 1.0 and 10 without deflection).
DEFLECT = 0.7
# GLOP on the LP (building it and solving it): about LP_MICROS_PER_TERM per
# nonzero up to LP_LINEAR_TERMS nonzeros (0.3-1.2 s at 0.5-2 million on 16- and
# 64-job rounds of 64-256 GPUs), then a time per nonzero growing with their number
# (the total with their square): 6.2 s at 2.65 million (mixed, 128 GPUs / 64
# queued, seed 0), 80 s at 9.2 million (hetero, 256 / 120, seed 1), unsolved at
# 90 s at 13 and 32 million (hetero and fragmented, 1,024 / 500, seed 500);
# predicted 7, 85, 178 and 993 s. Replay rounds of 1,008 GPUs once took 11-17 s at
# 4-11 million (predicted 16-121 s), where the ascent came within 0.2-1.6 points
# of it: where the prediction is too high the LP is skipped, and the prefix rows
# have that time. Tried after the ascent, when predicted to fit in LP_SHARE of the
# time left.
LP_MICROS_PER_TERM = 1.0
LP_LINEAR_TERMS = 1_000_000
# The LP gets at most this share of the time left after the ascent, the prefix
# rows the rest. Given all of it, GLOP on a 1,024-GPU round (hetero, 500 queued,
# seed 500; the bound's 24 s of a 120 s round) used 22 s, was stopped unsolved,
# and left the prefix rows no time: 5.20% below wspt, where 6 s gave 5.03%.
LP_SHARE = 0.5


@dataclass
class _Family:
    """One capacity family: its room per bucket, and the choices that use it."""

    room: np.ndarray
    choices: list[int] = field(default_factory=list)
    uses: list[float] = field(default_factory=list)


@dataclass
class _Relaxation:
    """The relaxed problem: per job in it its queue position and deferred cost; per
    choice (job, type, start bucket) its job, GPU type, cost, start ``lo`` and sure
    interval ``[hi, end)``; per family its room and users."""

    grid: np.ndarray
    fixed: float  # the jobs outside the relaxation, each at its own least cost
    positions: list[int]
    defer: np.ndarray
    job: np.ndarray
    gpu_type: np.ndarray
    cost: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    end: np.ndarray
    families: list[_Family]

    @cached_property
    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Per job, its number of choices and the first one's index: choices come
        job by job, each job's a run of them."""
        counts = np.bincount(self.job, minlength=len(self.defer))
        return counts, np.cumsum(counts) - counts

    @cached_property
    def room(self) -> np.ndarray:
        """The room per family (rows) and bucket."""
        return np.array([family.room for family in self.families])

    @cached_property
    def width(self) -> np.ndarray:
        """Each bucket's length."""
        return np.diff(self.grid)

    @cached_property
    def prefix_room(self) -> np.ndarray:
        """The room per family (rows) from now to each bucket's end: the prefix rows'."""
        return np.cumsum(self.room, axis=1)

    @cached_property
    def prefix_uses(self) -> _Uses:
        """Every use over ``[hi, hi + d)`` instead of ``[hi, end)``: what a choice
        surely does before each grid point, whatever its start in its bucket."""
        return _Uses.of(self, shifted=True)


@dataclass(frozen=True)
class Lagrangian:
    """The Lagrangian bound and, per queued job the relaxation placed at the prices
    that gave it, the start and the GPU type it picked (queue position -> seconds
    from now, and -> type; a job left out of the relaxation, or deferred by it, has
    neither): where and on what the capacity's prices say each job should run, a
    schedule's order and types to try."""

    bound: float
    starts: dict[int, float]
    types: dict[int, str] = field(default_factory=dict)


def lagrangian_bound(
    instance: Instance, upper: float, deadline: float, wall: float | None = None
) -> float:
    """The Lagrangian bound (module docstring) of ``instance``, its ascent aimed at
    ``upper`` (a decision's objective) and stopped once converged or at
    ``deadline`` (a :func:`time.perf_counter` instant), but not before
    :data:`MIN_STEPS` steps when ``wall`` (a later instant; None: ``deadline``)
    leaves time for them."""
    return solve_lagrangian(instance, upper, deadline, wall).bound


def solve_lagrangian(
    instance: Instance, upper: float, deadline: float, wall: float | None = None
) -> Lagrangian:
    """:func:`lagrangian_bound`, with the starts the relaxation picked (:class:`Lagrangian`)."""
    floor = usage_floor(instance)  # the GPU-second prices: the relaxation leaves them out
    upper -= floor
    relaxation = _relax(instance)
    if isinstance(relaxation, float):
        return Lagrangian(relaxation * (1 - SAFETY) + floor, {})
    uses = _Uses.of(relaxation)
    best, lam = _best_prices(relaxation, uses, upper, deadline, wall=wall)
    return _picked(relaxation, uses, lam, best * (1 - SAFETY) + floor)


def _best_prices(
    relaxation: _Relaxation,
    uses: _Uses,
    upper: float,
    deadline: float,
    lp_deadline: float | None = None,
    wall: float | None = None,
) -> tuple[float, np.ndarray]:
    """The best ``L(lam)`` found and its prices: the ascent's (stopped as
    :func:`lagrangian_bound` says), or the LP's dual prices when the LP fits in
    :data:`LP_SHARE` of the time left before ``deadline`` (or by ``lp_deadline``,
    when later) and they give more; then, with time
    left before ``deadline``, the best of those with the prefix rows' prices
    raised from 0 (:func:`_ascend`). ``upper`` is in the relaxation's units (the
    GPU-second prices left out)."""
    best, lam = _ascend(relaxation, uses, upper, deadline, deadline if wall is None else wall)
    if best < upper:
        now = time.perf_counter()
        share = now + LP_SHARE * max(0.0, deadline - now)
        lp_until = share if lp_deadline is None else max(share, lp_deadline)
        prices = _lp_prices(relaxation, uses, lp_until)
        if prices is not None:
            value = _value(relaxation, uses, prices)[0]
            if value > best:
                best, lam = value, prices
    if best < upper and time.perf_counter() < deadline:
        # The bucket rows' prices have converged (or are the LP's) with time left: the
        # prefix rows join, from 0, where the value is the same.
        start = np.vstack([lam, np.zeros_like(lam)])
        more, prices = _ascend(relaxation, uses, upper, deadline, deadline, start)
        if more > best:
            best, lam = more, prices
    return best, lam


def _picked(relaxation: _Relaxation, uses: _Uses, lam: np.ndarray, bound: float) -> Lagrangian:
    """``bound``, with each job the relaxation places at prices ``lam`` at its cheapest
    choice's start and type."""
    r = relaxation
    _, cost, least = _value(r, uses, lam)
    chosen = _cheapest(r, cost, least)
    placed = [(r.positions[j], chosen[j]) for j in np.nonzero(chosen >= 0)[0].tolist()]
    return Lagrangian(
        bound,
        {k: float(r.lo[c]) for k, c in placed},
        {k: str(r.gpu_type[c]) for k, c in placed},
    )


def _cheapest(relaxation: _Relaxation, cost: np.ndarray, least: np.ndarray) -> np.ndarray:
    """Per job, the index of its cheapest choice at ``cost`` (the first of equals;
    ``least`` the least per job), or -1 where it is deferred (cheaper, or no choice)."""
    r = relaxation
    ties = np.nonzero(cost <= least[r.job])[0][::-1]  # the first of equals written last
    chosen = np.full(len(r.defer), -1)
    chosen[r.job[ties]] = ties
    chosen[least >= r.defer] = -1
    return chosen


def _relax(instance: Instance) -> _Relaxation | float:
    """The choices and families of ``instance``; or, when no job has a choice to
    price, the bound itself (each job at its least cost)."""
    starts = earliest_starts(instance)
    _, ends = starts.times()
    state = starts.state  # the GPUs every valid decision leaves busy, per node
    weights = instance.weights
    horizon = instance.policy.horizon_s
    nodes_of: dict[str, list[int]] = {}
    for n, node in enumerate(instance.nodes):
        if not node.down and not node.draining and node.healthy_indices:
            nodes_of.setdefault(node.gpu_type, []).append(n)
    topologies_of = {p: [state.topology(n) for n in ns] for p, ns in nodes_of.items()}
    fixed = 0.0
    jobs: list[tuple[int, float, list[tuple[str, int, float, _Shape]]]] = []
    sizes: dict[str, set[int]] = {p: {1} for p in nodes_of}
    for k, job in enumerate(instance.queue):
        defer = weights[k] * instance.deferred_cost_end(k)
        if job.shares or job.cpu_only:
            fixed += weights[k] * min(ends[k], instance.deferred_cost_end(k))
            continue
        options = []
        for p, d in instance.durations[k].items():
            release = starts.start(k, p)
            if p in nodes_of and release <= horizon:
                shape = _Shape.of(job, topologies_of[p])
                sizes[p].add(shape.piece)
                options.append((p, d, release, shape))
        if options:
            jobs.append((k, defer, options))
        else:
            fixed += defer
    choices = sum(len(options) for _, _, options in jobs)
    if not choices:
        return fixed
    span = horizon + max(d for _, _, options in jobs for _, d, _, _ in options) + 1
    step, growth = FIRST_BUCKET_S, BUCKET_GROWTH
    grid = np.array(time_buckets(span, step=step, ratio=growth))
    while choices * len(grid) > MAX_OPTIONS and growth < 1:
        step, growth = step * 2, growth * 1.5
        grid = np.array(time_buckets(span, step=step, ratio=growth))
    families: dict[tuple[str, int], _Family] = {}
    for p, of_type in sizes.items():
        nodes = [(state.gpu_profile(n), state.healthy_count(n)) for n in nodes_of[p]]
        for size in sorted(of_type):
            families[(p, size)] = _Family(slots(nodes, size).areas(grid))
    least_prices = _least_prices(instance, nodes_of)
    quotas = _quota_families(instance, state, grid, {instance.queue[k].tenant for k, _, _ in jobs})
    job_of, type_of, cost, lo_of, hi, end = [], [], [], [], [], []
    count = 0
    for j, (k, defer, options) in enumerate(jobs):
        job = instance.queue[k]
        quota = quotas.get(job.tenant)
        for p, d, release, shape in options:
            first = max(0, int(np.searchsorted(grid, release, side="right")) - 1)
            lo = np.maximum(grid[first:-1], release)
            price = weights[k] * (lo + d) + least_prices[k].get(p, 0.0)
            keep = np.nonzero((lo <= horizon) & (price < defer))[0]
            if not len(keep):
                continue
            job_of.append(np.full(len(keep), j))
            type_of.append(np.full(len(keep), p, dtype=object))
            cost.append(price[keep])
            lo_of.append(lo[keep])
            hi.append(grid[first + 1 :][keep])
            end.append(lo[keep] + d)
            for size in sizes[p]:
                amount = shape.pieces(size)
                if amount > 0:
                    family = families[(p, size)]
                    family.choices.extend(range(count, count + len(keep)))
                    family.uses.extend([amount] * len(keep))
            if quota is not None:
                quota.choices.extend(range(count, count + len(keep)))
                quota.uses.extend([float(job.gpu_count)] * len(keep))
            count += len(keep)
    defers = np.array([defer for _, defer, _ in jobs])
    if not cost:
        return fixed + float(defers.sum())
    return _Relaxation(
        grid,
        fixed,
        [k for k, _, _ in jobs],
        defers,
        np.concatenate(job_of),
        np.concatenate(type_of),
        np.concatenate(cost),
        np.concatenate(lo_of),
        np.concatenate(hi),
        np.concatenate(end),
        [family for family in [*families.values(), *quotas.values()] if family.choices],
    )


def _least_prices(instance: Instance, nodes_of: dict[str, list[int]]) -> list[dict[str, float]]:
    """Per queued job, per GPU type, the least soft-preference price of any placement on
    that type (:mod:`whale_opt.preferences`): off its preferred types, or outside its
    zone on every node of the type. An NVLink price is left out: some placement may
    avoid it."""
    # One node per type and zone stands for them all: those rules read nothing else.
    samples = {
        p: list({instance.nodes[n].zone: n for n in ns}.values()) for p, ns in nodes_of.items()
    }
    out: list[dict[str, float]] = []
    for k, job in enumerate(instance.queue):
        prices: dict[str, float] = {}
        if job.preferred_gpu_types or job.zone is not None:
            for p, sample in samples.items():
                price = min(
                    preferences.price(instance, k, _type_and_zone(instance, k, n)) for n in sample
                )
                if price:
                    prices[p] = price
        out.append(prices)
    return out


def _type_and_zone(instance: Instance, position: int, node: int) -> tuple[str, ...]:
    """The preferences job ``position`` drops on ``node`` alone, NVLink left out."""
    gpus = max(1, instance.queue[position].gpu_count)
    names = preferences.dropped(instance, position, {node: gpus})
    return tuple(name for name in names if name != "nvlink")


def _quota_families(
    instance: Instance, state: ClusterState, grid: np.ndarray, tenants: set[str]
) -> dict[str, _Family]:
    """Per tenant of ``tenants`` with a GPU quota, its family: the quota less what its
    running jobs that stay hold (``state``), integrated over each bucket."""
    out = {}
    for name in sorted(tenants):
        quota = tenant_quota(instance, name)
        if quota is None:
            continue
        held = state.tenant_profile(name)
        free = [max(0.0, quota - level) for level in held.levels]
        out[name] = _Family(Capacity(held.times, free).areas(grid))
    return out


@dataclass(frozen=True)
class _Shape:
    """How a job sits on the nodes of a type: ``gpus`` in all, ``node`` on each node
    it takes (all of them on one node, or whole nodes of that size; 0: it may
    spread); ``piece``: the piece size whose family tells its shape."""

    gpus: int
    node: int

    @property
    def piece(self) -> int:
        return self.node if self.node > 1 else 1

    @classmethod
    def of(cls, job: QueuedJob, topologies: list[NodeTopology]) -> _Shape:
        """``job``'s shape on nodes of ``topologies`` (one type's)."""
        if all(single_node(job, topo) for topo in topologies):
            return cls(job.gpu_count, job.gpu_count)
        sizes = {topo.size for topo in topologies}
        if job.topology == "nvlink" and len(sizes) == 1:
            size = sizes.pop()
            if job.gpu_count % size == 0:
                return cls(job.gpu_count, size)  # whole nodes of one size
        return cls(job.gpu_count, 0)

    def pieces(self, size: int) -> float:
        """The ``size``-GPU pieces it surely takes from ``sum_n floor(free_n / size)``."""
        if size == 1:
            return float(self.gpus)
        if self.node < size:
            return 0.0
        return float(self.gpus // self.node * (self.node // size))


def _lp_seconds(terms: int) -> float:
    """GLOP's predicted time to build and solve the relaxation's LP of ``terms``
    nonzeros: :data:`LP_MICROS_PER_TERM` each, times their number over
    :data:`LP_LINEAR_TERMS` past it (the total grows with their square there)."""
    return LP_MICROS_PER_TERM * 1e-6 * terms * max(1.0, terms / LP_LINEAR_TERMS)


def _lp_prices(relaxation: _Relaxation, uses: _Uses, deadline: float) -> np.ndarray | None:
    """The relaxation's LP solved by GLOP: its dual prices on the room (family x
    bucket); None when it would not be solved before ``deadline`` (predicted
    from its size), or GLOP did not prove it."""
    r = relaxation
    buckets = len(r.grid) - 1
    live = np.nonzero(uses.end > uses.hi)[0]
    first = np.searchsorted(r.grid, uses.hi[live], side="right") - 1
    spans = np.searchsorted(r.grid, uses.end[live], side="left") - first
    terms = int(spans.sum()) + 2 * len(r.cost)
    if _lp_seconds(terms) > deadline - time.perf_counter():
        return None
    row, column, value = _room_rows(r.grid, uses, live, first, spans)
    model = linear_solver_pb2.MPModelProto()
    for cost in [*r.cost.tolist(), *r.defer.tolist()]:
        model.variable.add(lower_bound=0.0, upper_bound=1.0, objective_coefficient=cost)
    counts, firsts = r.runs
    for j, (start, count) in enumerate(zip(firsts.tolist(), counts.tolist(), strict=True)):
        constraint = model.constraint.add(lower_bound=1.0, upper_bound=1.0)
        constraint.var_index.extend([*range(start, start + count), len(r.cost) + j])
        constraint.coefficient.extend([1.0] * (count + 1))
    rows, starts = np.unique(row, return_index=True)
    ends = np.append(starts[1:], len(row))[: len(starts)]  # none when no row
    room = r.room.ravel()
    for flat, a, b in zip(rows.tolist(), starts.tolist(), ends.tolist(), strict=True):
        constraint = model.constraint.add(lower_bound=-math.inf, upper_bound=float(room[flat]))
        constraint.var_index.extend(column[a:b].tolist())
        constraint.coefficient.extend(value[a:b].tolist())
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None or solver.LoadModelFromProto(model):
        return None
    left = deadline - time.perf_counter()  # building and loading it are behind
    if left <= 0:
        return None
    solver.SetTimeLimit(max(1, int(left * 1000)))
    # GLOP checks its own limit between iterations and overran it by 3.4 s of 19
    # on a 1,024-GPU round: a watchdog interrupts it at the deadline (GLOP lets
    # go of the interpreter while it solves).
    watchdog = threading.Timer(left, solver.InterruptSolve)
    watchdog.start()
    try:
        status = solver.Solve()
    finally:
        watchdog.cancel()
    if status != pywraplp.Solver.OPTIMAL:
        return None
    duals = np.array([c.dual_value() for c in solver.constraints()[len(r.defer) :]])
    prices = np.zeros(len(room))
    prices[rows] = np.maximum(0.0, -duals)  # a <= row of a minimisation: its dual is <= 0
    return prices.reshape(len(r.families), buckets)


def _room_rows(
    grid: np.ndarray, uses: _Uses, live: np.ndarray, first: np.ndarray, spans: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LP's room rows as (row, column, value) triples sorted by row (row: family
    x bucket, flattened; column: the choice): each ``live`` use's amount times
    the seconds its sure interval ``[hi, end)`` spends in each of the ``spans``
    buckets from bucket ``first``."""
    buckets = len(grid) - 1
    use = np.repeat(live, spans)
    offset = np.arange(len(use)) - np.repeat(np.cumsum(spans) - spans, spans)
    bucket = np.repeat(first, spans) + offset
    overlap = np.minimum(uses.end[use], grid[bucket + 1]) - np.maximum(uses.hi[use], grid[bucket])
    keep = overlap > 0
    row = (uses.family[use] * buckets + bucket)[keep]
    column = uses.choice[use][keep]
    value = (uses.amount[use] * overlap)[keep]
    order = np.argsort(row, kind="stable")
    return row[order], column[order], value[order]


def _value(
    relaxation: _Relaxation, uses: _Uses, lam: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """``L(lam)``, each choice's cost at prices ``lam`` and each job's least."""
    r = relaxation
    rows = len(r.families)
    cost = r.cost + uses.priced(lam[:rows], r.width, len(r.cost))
    paid = float((lam[:rows] * r.room).sum())
    if len(lam) > rows:  # the prefix rows' prices (:func:`_best_prices`)
        mu = lam[rows:]
        density = np.cumsum(mu[:, ::-1], axis=1)[:, ::-1]  # each bucket's, all prefixes past it
        cost += r.prefix_uses.priced(density, r.width, len(r.cost))
        paid += float((mu * r.prefix_room).sum())
    least = np.full(len(r.defer), np.inf)
    counts, firsts = r.runs
    offered = counts > 0
    least[offered] = np.minimum.reduceat(cost, firsts[offered])
    value = r.fixed + float(np.minimum(least, r.defer).sum()) - paid
    return value, cost, least


def _ascend(
    relaxation: _Relaxation,
    uses: _Uses,
    upper: float,
    deadline: float,
    wall: float,
    start: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """The best ``L(lam)`` of a projected subgradient ascent from ``start`` (None: all
    prices 0; with twice the families' rows: the prefix rows' prices below the
    buckets'), and the prices that gave it: stopped at ``deadline`` once it has
    taken :data:`MIN_STEPS` steps, at ``wall`` in any case."""
    r = relaxation
    grid = r.grid
    room = r.room
    prefix = start is not None and len(start) > len(room)
    # The ascent moves each bucket's price for the whole bucket (its price per
    # GPU-second times its length) by the bucket's overuse in GPUs (its use less
    # its room, over its length): in the prices per GPU-second themselves, a
    # bucket hours long moved a million times further than a 20 s one for the same
    # overuse. Measured over 32 rounds of 128-1,024 GPUs at 0.5 s (with the first
    # factor 1 against 2): the bound rose on all 32, mixed 1,024 from 64-67% below the
    # greedy to 24% (`bench/ascent_panel.py`).
    scale = r.width[None, :]  # each row's length: a bucket's
    if prefix:  # a prefix's price moves for the whole prefix, by its overuse in GPUs
        scale = np.vstack(
            [np.broadcast_to(scale, room.shape), np.broadcast_to(grid[1:], room.shape)]
        )
    # A price per row (family and bucket, or prefix) and GPU-second.
    lam = np.zeros_like(room) if start is None else start
    best, best_lam = -math.inf, lam
    factor, stall = START_FACTOR, 0
    previous = np.zeros_like(lam)
    steps = 0
    while True:
        value, cost, least = _value(r, uses, lam)
        if value > best:
            best, best_lam, stall = value, lam, 0
        else:
            stall += 1
            if stall >= STALLS:
                factor, stall = factor / 2, 0
        now = time.perf_counter()
        late = now >= wall or (now >= deadline and steps >= MIN_STEPS)
        if factor < MIN_STEP or best >= upper or late:
            return best, best_lam
        steps += 1
        # Each placed job's cheapest choice, and the use it makes.
        chosen = _cheapest(r, cost, least)
        picked = np.zeros(len(cost), dtype=bool)
        picked[chosen[chosen >= 0]] = True
        over = uses.made(picked, grid) - room
        if prefix:
            ahead = np.cumsum(r.prefix_uses.made(picked, grid) - room, axis=1)
            over = np.vstack([over, ahead])
        grad = over / scale + DEFLECT * previous
        grad[(lam <= 0) & (grad < 0)] = 0.0  # projected: a zero price stays put
        previous = grad  # the direction, deflected and projected
        norm = float((grad * grad).sum())
        if norm <= 0:
            return best, best_lam  # no bucket overfull: no price can raise it
        # Polyak's step towards the target, its length capped at four times the best
        # value's distance to it: uncapped, an overshoot (a value far below the
        # best) made the next step longer still, and the ascent never came back
        # (hetero-320/300: stuck at its first value, 21.6% below the greedy).
        step = factor * min(upper - value, 4 * (upper - best)) / norm
        lam = np.maximum(0.0, lam * scale + step * grad) / scale


@dataclass(frozen=True)
class _Uses:
    """Every (family, choice) use, flat and in family order: the choice, its amount,
    and where its sure interval ``[hi, end)`` falls on the grid (bucket and offset
    into it, for each end), so that pricing it is a few gathers per step."""

    family: np.ndarray
    choice: np.ndarray
    amount: np.ndarray
    hi: np.ndarray
    end: np.ndarray
    flat_hi: np.ndarray  # family x bucket, flattened: the bucket ``hi`` falls in
    flat_end: np.ndarray
    past_hi: np.ndarray  # seconds into that bucket
    past_end: np.ndarray
    families: int

    @classmethod
    def of(cls, r: _Relaxation, shifted: bool = False) -> _Uses:
        """The uses of ``r``'s choices over their sure intervals ``[hi, end)``, or
        ``shifted``: over ``[hi, hi + d)`` (the prefix rows')."""
        family = np.concatenate(
            [np.full(len(f.choices), k, dtype=np.int64) for k, f in enumerate(r.families)]
        )
        choice = np.concatenate([np.asarray(f.choices, dtype=np.int64) for f in r.families])
        amount = np.concatenate([np.asarray(f.uses, dtype=float) for f in r.families])
        hi, end = r.hi[choice], r.end[choice]
        if shifted:
            end = hi + (end - r.lo[choice])
        width = r.width
        buckets = len(width)

        def locate(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            at = np.clip(np.searchsorted(r.grid, t, side="right") - 1, 0, buckets - 1)
            return family * buckets + at, np.clip(t - r.grid[at], 0.0, width[at])

        flat_hi, past_hi = locate(hi)
        flat_end, past_end = locate(end)
        return cls(
            family, choice, amount, hi, end, flat_hi, flat_end, past_hi, past_end, len(r.families)
        )

    def priced(self, lam: np.ndarray, width: np.ndarray, choices: int) -> np.ndarray:
        """Per choice, what its uses cost at prices ``lam`` (family x bucket): each use's
        amount times the prices' integral over its sure interval."""
        before = (np.cumsum(lam * width, axis=1) - lam * width).ravel()  # up to each bucket
        flat = lam.ravel()
        sure = before[self.flat_end] + self.past_end * flat[self.flat_end]
        sure -= before[self.flat_hi] + self.past_hi * flat[self.flat_hi]
        return np.bincount(
            self.choice, weights=self.amount * np.maximum(0.0, sure), minlength=choices
        )

    def made(self, picked: np.ndarray, grid: np.ndarray) -> np.ndarray:
        """Per family and bucket, the use the ``picked`` choices make of it.

        A use of ``u`` over ``[a, c)`` has used ``u * (ramp(g - a) - ramp(g - c))`` by
        the grid point ``g``; summed over the uses whose ``a`` (or ``c``) lies
        before ``g``, that is ``g * sum(u) - sum(u * a)``: two running sums per
        family over the buckets the ends fall in, not a row per use."""
        mine = np.nonzero(picked[self.choice] & (self.end > self.hi))[0]
        shape = (self.families, len(grid))
        family, amount = self.family[mine], self.amount[mine]
        used = np.zeros(shape)
        for ends, sign in ((self.hi[mine], 1.0), (self.end[mine], -1.0)):
            # Past the grid's last point an end adds nothing at any grid point.
            inside = ends < grid[-1]
            at = np.searchsorted(grid, ends[inside], side="right")  # first point past it
            flat = family[inside] * len(grid) + at
            u = amount[inside]
            weight = np.bincount(flat, weights=u, minlength=used.size).reshape(shape)
            moment = np.bincount(flat, weights=u * ends[inside], minlength=used.size)
            used += sign * (
                grid * np.cumsum(weight, axis=1) - np.cumsum(moment.reshape(shape), axis=1)
            )
        return np.maximum(0.0, np.diff(used, axis=1))  # no use is negative: rounding
