"""The CP-SAT round solver: greedy first, then exact large neighbourhood search.

``CpSatPolicy.decide``:

1. The WSPT greedy gives a complete decision (the hint and the fallback).
2. A local search over list-scheduling orders improves it cheaply (from the
   greedy's order, the previous round's plan, and, when the Lagrangian bound
   runs, the order of the starts its prices pick blended with the greedy's,
   some with each job held to the GPU type they pick
   (:data:`GUIDED_BLENDS`; not with a deterministic preset: the bound's ascent
   stops on the clock)), then one
   over the node each one-node job runs on and its place there
   (:mod:`whale_opt.placement.node_search`), cheaper still per move on large
   rounds.
3. CP-SAT large neighbourhood search (:mod:`whale_opt.cpsat.lns`): repeatedly
   free a few jobs, fix every other job, and solve the freed jobs *exactly*
   (:mod:`whale_opt.cpsat.cpmodel`: per-node GPU / CPU / memory cumulatives
   over time, exact NVLink sets for what starts now, gangs, racks, quotas,
   soft preferences at their prices) with the incumbent as a complete hint.
   When preemption is allowed, the running jobs the freed ones may displace
   become optional too (:mod:`whale_opt.cpsat.victims`): kept, or preempted
   at their price for a displacing job started on their GPUs. Every solution
   decodes into a valid decision; improvements are kept.

The greedy is the WSPT policy's own schedule, preemptions included, so the
round is never worse than ``wspt``. The objective is the decision's
(:func:`whale_opt.decision.objective`): effective weights, preference and
preemption prices; each decoded neighbourhood is re-priced by it and must
cost what the model optimised (``pricing_gap`` in the decision's stats).

A round of at most ``exact_jobs`` queued jobs (a preset setting, 64 by
default) is first solved as one model (:func:`whale_opt.cpsat.lns.exact_round`):
every queued job free with all its choices, every running job a queued one may
preempt decided. The round returns the moment CP-SAT proves that model;
otherwise its best solution is the incumbent of steps 2 and 3.

The time limit is a hard wall: each CP-SAT call gets what is left, and a
watchdog stops a search that overshoots. Each of the four searches (the
exact model, the order search, the node search, the neighbourhoods) ends earlier once it
has gone the preset's ``patience_share`` of the limit without progress
(:mod:`whale_opt.patience`; ``stalled`` in the stats: the last one did).
The status is ``optimal`` when
CP-SAT proved the round's model optimal, or the objective meets the
bound; ``feasible`` when the greedy was improved, ``greedy-fallback``
otherwise. The reported bound is valid for every decision, the highest of:
the analytic one (:mod:`whale_opt.bounds.analytic`); when the run reports
bounds and the round is not proven by its whole model, the Lagrangian one
(:mod:`whale_opt.bounds.lagrangian`, given ``LAGRANGIAN_SHARE`` of the limit,
which the whole model leaves it, or ``LARGE_LAGRANGIAN_SHARE`` on a queue too
long for one whole model); and CP-SAT's own bound
on the whole round's model when that model is complete (its LP sees each
job's earliest start and the mean-busy-time cuts of :mod:`whale_opt.cpsat.cuts`).

The policy keeps no state between or during rounds (what a round did goes
into :attr:`whale_opt.decision.Decision.stats`): one policy object can decide
rounds in several threads at once.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from whale_opt.bounds import reported_bound, solve_lagrangian
from whale_opt.check import check
from whale_opt.cpsat.lns import LnsStats, exact_round, large_neighbourhood_search
from whale_opt.cpsat.presets import Preset, load_preset
from whale_opt.decision import Decision, JobDecision, Status, meets_bound, objective
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.patience import Patience
from whale_opt.placement.node_search import improve_nodes
from whale_opt.placement.order_search import TypedOrder, blend_orders, improve, order_by_starts
from whale_opt.placement.preempt import improve_by_preemption
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance

log = logging.getLogger("whale_opt")
HINT_SHARE = 0.1  # the hint is list-scheduled when the greedy took at most this share of the limit
FINISH_S_PER_JOB = 60e-6  # assembling and checking a decision, per job (measured: 20-50 us)
# The Lagrangian bound's share of the limit, after the whole model: on replay rounds
# of ~30 jobs on 1,008 GPUs, 0.5 s of it comes within 0.1% of the converged bound
# (0.9 s p50; bench/EXACT.md).
LAGRANGIAN_SHARE = 0.1
# Its share on a queue too long for one whole model, where its ascent is still rising
# at a tenth of the limit and the searches after it gain little from that time:
# cpsat at 5 s on 1,024 GPUs / 500 queued (seeds 530-533), median gap 6.2% -> 5.0%,
# against wspt hetero -0.86 -> -1.45%, fragmented -1.70 -> -2.13%, mixed and dgx1
# within 0.1 point; on 320 GPUs / 300 queued (12 rounds) the median gap 6.5% -> 5.8%,
# -2.72 -> -2.79% against wspt. 0.3 was no better (bench/EXACT.md).
LARGE_LAGRANGIAN_SHARE = 0.2
# The Lagrangian prices' order (the starts they pick), blended with the greedy's this
# share of the way, and with each job held to the GPU type the prices picked for it
# when the second is True (a TypedOrder; only where a job has several types), in this
# order of preference, each one more order the order search starts from, as many as
# fit in GUIDED_SHARE of the time left. cpsat at 5 s against wspt on 1,024 GPUs / 500
# queued, mean over seeds 530-533, with the blends 0.5, 0.25 and 0.75 alone, then
# with these: hetero -0.84 / -1.48%, fragmented -1.40 / -2.21%, mixed -4.41 / -4.64%,
# dgx1 (one type) -1.74 / -1.74% (bench/EXACT.md).
GUIDED_BLENDS = ((1.0, True), (0.5, False), (0.75, False), (0.75, True), (0.25, False))
GUIDED_SHARE = 0.2


def patience_seconds(preset: Preset, limit: float) -> float:
    """How long a round's search may go without progress: the preset's share of
    the limit, but never less than half of one neighbourhood's CP-SAT limit
    (a shorter patience would stop neighbourhoods before they search);
    ``math.inf`` when the preset has none."""
    if not preset.patience_share:
        return math.inf
    return max(preset.patience_share * limit, 0.5 * preset.round_limit_s)


def guided_count(spare: float, search_share: float, greedy_s: float, given: int) -> int:
    """How many of the Lagrangian prices' orders (:data:`GUIDED_BLENDS`) a round with
    ``spare`` seconds left adds to the ``given`` orders its search starts from, each
    a list schedule of about ``greedy_s``: as many as fit in :data:`GUIDED_SHARE`
    of the time, and never so many that the order search (``search_share`` of the
    time, listing every order and one more before its first move) would not start."""
    each = max(greedy_s, 1e-6)
    by_share = math.floor(GUIDED_SHARE * spare / each)
    by_search = math.floor(search_share * spare / each) - given - 2
    return max(0, min(len(GUIDED_BLENDS), by_share, by_search))


def hint_order(
    instance: Instance, hint: tuple[str, ...], greedy_order: list[int]
) -> list[int] | None:
    """Queue positions in ``hint``'s order, then the others in ``greedy_order``'s
    (None: no hinted job is queued, or the order is the greedy's)."""
    index = instance.queue_index
    first = list(dict.fromkeys(index[i] for i in hint if i in index))
    if not first:
        return None
    taken = set(first)
    order = first + [k for k in greedy_order if k not in taken]
    return None if order == greedy_order else order


def _schedule(instance: Instance, order: list[int]) -> list[JobDecision]:
    """The WSPT list schedule of ``order``, improved by the preemptions that pay."""
    jobs = list_schedule(instance, order, prefer=WsptPolicy.prefer)
    return improve_by_preemption(instance, order, jobs, prefer=WsptPolicy.prefer)


def _repacked(
    instance: Instance,
    jobs: list[JobDecision],
    value: float,
    greedy_order: list[int],
    stats: dict[str, float | int],
) -> tuple[list[JobDecision], float]:
    """``jobs`` list-scheduled again in the order of their starts, kept when that costs
    no more: the greedy's node choice (tightest fit) instead of whichever node
    the model happened to take, at no cost to the round."""
    index = instance.queue_index
    rank = {k: r for r, k in enumerate(greedy_order)}
    keyed = []
    for item in jobs:
        k = index.get(item.id)
        if k is None:
            continue
        start = item.start_s if item.start_s is not None else float("inf")
        keyed.append((start, rank.get(k, len(rank)), k))
    order = [k for _, _, k in sorted(keyed)]
    repacked = _schedule(instance, order)
    repacked_value = objective(instance, repacked)
    stats["repack_value"] = repacked_value
    if repacked_value <= value + 1e-9 * max(1.0, value):
        stats["repacked"] = 1
        return repacked, repacked_value
    return jobs, value


class CpSatPolicy:
    """Greedy, order search and exact CP-SAT neighbourhoods; never worse than the greedy.

    Parameters
    ----------
    preset
        A shipped preset name (:func:`whale_opt.cpsat.presets.load_preset`;
        None: ``default``).
    **overrides
        CP-SAT parameters set over the preset's.
    """

    name = "cpsat"

    def __init__(self, preset: str | None = None, **overrides: Any) -> None:
        self.preset = load_preset(preset)
        self.parameters = {**self.preset.parameters, **overrides}

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        """The round's decision (see the module docstring), its figures in ``stats``."""
        started = time.perf_counter()
        limit = options.time_limit_s
        # Room to assemble and check the decision (both linear in the jobs).
        finish = min(0.05, 0.03 * limit) + FINISH_S_PER_JOB * (
            len(instance.queue) + len(instance.running)
        )
        deadline = started + limit - finish
        greedy_order = wspt_order(instance)
        greedy = _schedule(instance, greedy_order)
        jobs, value = greedy, objective(instance, greedy)
        greedy_value = value
        stats: dict[str, float | int] = {
            "greedy_value": greedy_value,
            "greedy_s": time.perf_counter() - started,
        }
        # Another list schedule costs what the greedy did: only when that is small.
        cheap = stats["greedy_s"] <= HINT_SHARE * limit
        # Room kept for the final repack, one more list schedule.
        repack = cheap and not self.preset.deterministic
        if repack:
            deadline -= 1.5 * stats["greedy_s"]
        orders: list[list[int] | TypedOrder] = [greedy_order]
        hinted = hint_order(instance, options.hint, greedy_order)
        if hinted is not None and cheap:
            # The previous round's plan, carried on: often as good, at times better.
            orders.append(hinted)
            planned = _schedule(instance, hinted)
            planned_value = objective(instance, planned)
            stats["hint_value"] = planned_value
            if planned_value < value - 1e-9:
                jobs, value = planned, planned_value
        lns = LnsStats()
        tic = time.perf_counter()
        bound = reported_bound(instance, options.report_bound)
        stats["bound_s"] = time.perf_counter() - tic
        try:
            jobs, value, bound, proven = self._search(
                instance, options, jobs, value, bound, greedy_order, orders, deadline, lns, stats
            )
        except Exception:  # a model that cannot be built or solved must not lose the round
            log.exception("cpsat search failed on %s: the decision before it stands", instance.name)
            stats.update(search_error=1, stalled=0)
            proven = False
        stats.update(lns.as_dict())
        return self._finish(
            instance, jobs, value, bound, proven, greedy, greedy_order, stats, started, repack
        )

    def _search(
        self,
        instance: Instance,
        options: SolveOptions,
        jobs: list[JobDecision],
        value: float,
        bound: float,
        greedy_order: list[int],
        orders: list[list[int] | TypedOrder],
        deadline: float,
        lns: LnsStats,
        stats: dict[str, float | int],
    ) -> tuple[list[JobDecision], float, float, bool]:
        """The whole-round model, the Lagrangian bound, the order search and the
        neighbourhoods (the module docstring's steps), from ``jobs`` of objective
        ``value``, the order search from ``orders`` (the greedy's first) and the
        Lagrangian prices' orders: the best jobs, their objective, the bound and
        whether proven."""
        limit = options.time_limit_s
        preset = self.preset
        proven = False
        # From here on the round may end early, once its search stops finding better.
        patience = Patience(patience_seconds(preset, limit), gain=preset.patience_gain)
        small = len(instance.queue) <= preset.exact_jobs  # one whole model's size
        if instance.queue and bound < value - 1e-9 and small:
            spare = deadline - time.perf_counter()
            # A queue of at most hood_size jobs: its whole model gets all the time. Given
            # half (exact_share), with the order search after it, each round's objective
            # came out better but the replays' worse: the 256-GPU dgx1 replay of
            # bench/VERSUS_WSPT.md +1.4-1.6% against wspt in four runs, -0.0-0.2%
            # with all of it (bench/GUIDED_ORDER.md, bisected to c68a905).
            share = 1.0 if len(instance.queue) <= preset.hood_size else preset.exact_share
            if options.report_bound:  # room for the Lagrangian bound, if the model is not proven
                share = min(share, 1.0 - LAGRANGIAN_SHARE)
            jobs, value, proven = exact_round(
                instance,
                jobs,
                value,
                time.perf_counter() + spare * share,
                preset,
                self.parameters,
                options.seed,
                lns,
                patience,
            )
            # CP-SAT's bound on the whole round's model holds for every decision too.
            if lns.exact_bound > value + 1e-6 * max(1.0, value):
                log.error("cpsat bound %g above a decision of %g", lns.exact_bound, value)
            bound = max(bound, min(lns.exact_bound, value))
        if options.report_bound and instance.queue and bound < value - 1e-9 and not proven:
            tic = time.perf_counter()
            given = LAGRANGIAN_SHARE if small else LARGE_LAGRANGIAN_SHARE
            until = min(deadline, tic + given * limit)
            # Its first steps, where the prices that order the queue come from, may
            # take up to twice as long again (lagrangian.MIN_STEPS).
            wall = min(deadline, tic + 3 * given * limit)
            relaxed = solve_lagrangian(instance, value, until, wall)
            bound = max(bound, relaxed.bound)
            stats["bound_s"] += time.perf_counter() - tic
            if relaxed.starts and not preset.deterministic:  # its prices decide the order
                searched = preset.small_search_share if small else preset.search_share
                count = guided_count(
                    deadline - time.perf_counter(), searched, stats["greedy_s"], len(orders)
                )
                guided = order_by_starts(instance, relaxed.starts, jobs, greedy_order)
                added = 0
                # Types matter where a job the relaxation placed may run on several.
                several = any(len(instance.durations[k]) > 1 for k in relaxed.types)
                for blend, typed in GUIDED_BLENDS:
                    if typed and not several:
                        continue
                    blended = blend_orders(greedy_order, guided, blend)
                    order = TypedOrder(blended, relaxed.types) if typed else blended
                    if added < count and order not in orders:
                        orders.append(order)
                        added += 1
                stats["guided_orders"] = added
        if instance.queue and bound < value - 1e-9 and not proven:
            patience.restart(value)
            spare = deadline - time.perf_counter()
            share = preset.small_search_share if small else preset.search_share
            stop = time.perf_counter() + spare * share
            moves = None
            if preset.deterministic:  # counted moves, not time, decide when to stop
                stop, moves = deadline, preset.search_moves
            # Its first step lists the given orders again (a greedy's time each, not
            # stopped half way): only when there is time for that and a move after.
            listing = (len(orders) + 1) * stats["greedy_s"]
            if preset.deterministic or stop - time.perf_counter() > listing:
                found, found_value = improve(instance, orders, stop, options.seed, moves, patience)
                stats["search_value"] = found_value
                if found_value < value:
                    jobs, value = found, found_value
            # Building the node search and placing its result back cost at most about
            # what the greedy did each: it runs when that leaves time for moves.
            spare = deadline - stats["greedy_s"] - time.perf_counter()
            roomy = preset.deterministic or spare > 2 * stats["greedy_s"]
            if bound < value - 1e-9 and preset.node_share > 0 and roomy:
                patience.restart(value)
                stop, moves = time.perf_counter() + spare * preset.node_share, None
                if preset.deterministic:
                    stop, moves = deadline, preset.node_moves
                jobs, value, nodes = improve_nodes(
                    instance, jobs, value, stop, options.seed, patience, moves, WsptPolicy.prefer
                )
                stats.update(
                    node_moves=nodes.tried,
                    node_moved=nodes.moved,
                    node_stalled=int(nodes.stalled),
                    node_value=value,
                )
            if bound < value - 1e-9:
                patience.restart(value)
                jobs, value = large_neighbourhood_search(
                    instance,
                    jobs,
                    value,
                    bound,
                    deadline,
                    preset,
                    self.parameters,
                    options.seed,
                    lns,
                    patience,
                )
        stats["stalled"] = int(patience.stalled)
        return jobs, value, bound, proven

    def _finish(
        self,
        instance: Instance,
        jobs: list[JobDecision],
        value: float,
        bound: float,
        proven: bool,
        greedy: list[JobDecision],
        greedy_order: list[int],
        stats: dict[str, float | int],
        started: float,
        repack: bool,
    ) -> Decision:
        """The decision: repacked when that costs no more, its status, and the greedy's
        instead when the checker finds anything wrong with it."""
        greedy_value = stats["greedy_value"]
        if repack and value < greedy_value - 1e-9:
            jobs, value = _repacked(instance, jobs, value, greedy_order, stats)
        improved = value < greedy_value - 1e-9
        if proven or meets_bound(value, bound):
            status = Status.OPTIMAL
        elif improved:
            status = Status.FEASIBLE
        else:
            status = Status.GREEDY_FALLBACK
        decision = assemble(instance, self.name, jobs, status, bound, started)
        fallback = improved and self._rejected(instance, decision)
        if fallback:  # a model bug must never reach a cluster: the greedy stands
            status = Status.GREEDY_FALLBACK
            decision = assemble(instance, self.name, greedy, status, bound, started)
        stats.update(improved=int(improved), fallback=int(fallback))
        return decision.with_changes(stats=stats)

    @staticmethod
    def _rejected(instance: Instance, decision: Decision) -> bool:
        """Whether the checker finds anything wrong with ``decision`` (logged)."""
        problems = check(instance, decision)
        if problems:
            log.error("cpsat decision rejected by the checker: %s", problems[:3])
        return bool(problems)
