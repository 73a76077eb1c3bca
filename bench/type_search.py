"""How far would a search over GPU types, pruned by the Lagrangian prices, get?

An experiment towards proving 16-job rounds (issue 12; ``bench/EXACT.md``).
For one generated round, with ``U`` cpsat's 5 s objective:

1. The Lagrangian bound ``L`` at its best prices (the ascent, then the LP's
   duals when they fit). At fixed prices the bound is a sum over jobs, so
   holding job ``j`` to type ``p`` raises it by ``delta(j, p)``: its least
   priced choice on ``p`` less its least over all (deferral included). A type
   assignment whose deltas add up to ``U - L`` or more cannot beat ``U``
   (weak duality holds at any prices); the rest "survive".
2. Each surviving assignment (up to ``--check``) is bounded again: the
   Lagrangian bound of the round with every job held to its type, a fresh
   ascent of at most ``--ascent`` seconds; it survives if that bound is still
   below ``U`` by more than :data:`TOLERANCE` of it.
3. With ``--close S``, what survives both goes to CP-SAT: the whole round's
   model with the assignment's types fixed, ``S`` seconds each, tallied as
   proved no better (or infeasible), better, or open. Every assignment
   closed "no better" would prove ``U`` optimal.

It reads the bound's internals (``_relax``, ``_Uses``, ``_best_prices``,
``_value``): a measurement, not an API.

    PYTHONPATH=<clone> python <clone>/bench/type_search.py --family hetero --gpus 128 --seed 501 \
        --close 5
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from ortools.sat.python import cp_model

from whale_opt.bounds import lagrangian
from whale_opt.bounds.analytic import usage_floor
from whale_opt.cpsat.cpmodel import NeighbourhoodModel, outside_cost
from whale_opt.cpsat.lns import whole_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.problem_data import Instance
from whale_opt.solve import solve, wspt_greedy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from whole_bound import FOUND, one_round, round_parser, solve_model  # a sibling script

DEFER = "deferred"
# A re-bound this close to cpsat's objective rules the assignment out: the ascent stops
# once it reaches its target (cpsat's objective), and the bound is shaded by 1e-9.
TOLERANCE = 1e-6
Options = list[list[tuple[float, str]]]  # per relaxed job: (delta, type or DEFER), cheapest first


def priced_options(instance: Instance, upper: float) -> tuple[float, list[int], Options]:
    """The slack ``U - L`` at the best prices found, the relaxed jobs' queue
    positions, and each one's options with their deltas."""
    floor = usage_floor(instance)
    relaxation = lagrangian._relax(instance)
    if isinstance(relaxation, float):
        raise SystemExit(f"{instance.name}: no job has a choice to price")
    uses = lagrangian._Uses.of(relaxation)
    started = time.perf_counter()
    _, prices = lagrangian._best_prices(
        relaxation, uses, upper - floor, started + 5, lp_deadline=started + 35
    )
    value, cost, least = lagrangian._value(relaxation, uses, prices)
    base = np.minimum(least, relaxation.defer)
    runs = relaxation.end - relaxation.lo  # a choice's duration tells its type
    options: Options = []
    for j, k in enumerate(relaxation.positions):
        mine = []
        for gpu_type, duration in instance.durations[k].items():
            on = (relaxation.job == j) & np.isclose(runs, duration)
            if on.any():
                mine.append((float(cost[on].min() - base[j]), gpu_type))
        mine.append((float(relaxation.defer[j] - base[j]), DEFER))
        options.append(sorted(mine))
    return upper - floor - value, relaxation.positions, options


def survivors(
    slack: float, positions: list[int], options: Options, most: int
) -> list[dict[int, str]]:
    """Up to ``most`` type assignments whose deltas add up to less than ``slack``
    (depth first, the jobs with the most live options first)."""
    live = [sum(d < slack for d, _ in mine) for mine in options]
    order = sorted(range(len(options)), key=lambda j: -live[j])
    found: list[dict[int, str]] = []

    def walk(i: int, total: float, chosen: dict[int, str]) -> None:
        if len(found) >= most:
            return
        if i == len(order):
            found.append(dict(chosen))
            return
        for delta, gpu_type in options[order[i]]:
            if total + delta >= slack:
                break  # cheapest first: the rest cost more
            chosen[positions[order[i]]] = gpu_type
            walk(i + 1, total + delta, chosen)
            del chosen[positions[order[i]]]

    walk(0, 0.0, {})
    return found


def main() -> None:
    parser = round_parser(__doc__.splitlines()[0], gpus=128, seed=501)
    parser.add_argument("--check", type=int, default=300, help="assignments re-bounded at most")
    parser.add_argument("--ascent", type=float, default=2.0, help="seconds per re-bound")
    parser.add_argument(
        "--close", type=float, default=0.0, help="then CP-SAT seconds per survivor (0: none)"
    )
    args = parser.parse_args()

    instance = one_round(args)
    upper = solve(instance, "cpsat", time_limit_s=5).objective
    slack, positions, options = priced_options(instance, upper)
    total = int(np.prod([len(mine) for mine in options], dtype=float))
    alive = survivors(slack, positions, options, 10**6)
    print(
        f"{instance.name}: cpsat 5 s {upper:,.0f}, Lagrangian {upper - slack:,.0f} "
        f"({slack / upper:.2%} below); {len(positions)} of {len(instance.queue)} jobs relaxed"
    )
    print(f"type assignments surviving the prices: {len(alive):,} of {total:,}")
    tic = time.perf_counter()
    checked = alive[: args.check]
    below: list[dict[int, str]] = []
    deferring = 0
    for chosen in checked:
        if DEFER in chosen.values():
            deferring += 1  # a deferral is not a type the instance can hold a job to
            continue
        queue = tuple(
            replace(job, gpu_types=(chosen[k],)) if k in chosen else job
            for k, job in enumerate(instance.queue)
        )
        deadline = time.perf_counter() + args.ascent
        bound = lagrangian.lagrangian_bound(instance.replace(queue=queue), upper, deadline)
        if bound < upper * (1 - TOLERANCE):
            below.append(chosen)
    print(
        f"re-bounded with their types held: {len(checked) - deferring} of {len(checked)} "
        f"({deferring} defer a job, not re-bounded); still below cpsat: {len(below)}; "
        f"{time.perf_counter() - tic:.1f} s"
    )
    if args.close:
        close(instance, upper, below, args.close)
    complete = len(alive) < 10**6 and len(checked) == len(alive) and not deferring
    if args.close and complete:
        print("every surviving assignment was checked: the tally above covers them all")


def close(
    instance: Instance, upper: float, assignments: list[dict[int, str]], limit: float
) -> None:
    """CP-SAT on the whole round's model with each assignment's types fixed: how many
    it proves no better than ``upper`` (or infeasible), finds better, or leaves open."""
    greedy = wspt_greedy(instance)
    parameters = load_preset(None).parameters
    tally = {"no better": 0, "better": 0, "open": 0}
    slowest = 0.0
    tic = time.perf_counter()
    for chosen in assignments:
        hood, _, _ = whole_neighbourhood(instance, greedy)
        built = NeighbourhoodModel(hood)
        held = [
            v.on_type.get(chosen[item.position])
            for item, v in zip(hood.jobs, built.variables.jobs, strict=True)
            if item.position in chosen
        ]
        if any(lit is None for lit in held):  # no node of that type can ever host the job
            tally["no better"] += 1
            continue
        for lit in held:
            built.model.add(lit == 1)
        solver, status = solve_model(built.model, parameters, limit)
        slowest = max(slowest, solver.wall_time)
        value = built.objective.value(solver) + outside_cost(hood) if status in FOUND else None
        if status == cp_model.INFEASIBLE or (
            status == cp_model.OPTIMAL and value is not None and value >= upper * (1 - TOLERANCE)
        ):
            tally["no better"] += 1
        elif value is not None and value < upper * (1 - TOLERANCE):
            tally["better"] += 1
        else:
            tally["open"] += 1
    print(
        f"CP-SAT with the types fixed ({limit:g} s each): {tally}; slowest "
        f"{slowest:.2f} s, all {time.perf_counter() - tic:.1f} s"
    )


if __name__ == "__main__":
    main()
