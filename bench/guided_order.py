"""The orders the Lagrangian bound's prices give: their list schedules alone, and cpsat with them.

Run alone on an idle machine, from a clean clone::

    PYTHONPATH=<clone> python <clone>/bench/guided_order.py   # prints the two tables

For each family and seed (:func:`whale_opt.generate.generate`, ``--gpus`` /
``--queued``, seeds from ``--seed``):

- **the orders alone**: the Lagrangian ascent (``--ascent`` seconds, aimed at
  the greedy's value), then list schedules in the order of the starts its
  best prices pick (:func:`whale_opt.placement.order_search.order_by_starts`),
  unblended and blended with the greedy's order as the round does (each job
  held to the GPU type the prices picked for it, where the round does),
  against the WSPT greedy's list schedule; deterministic but for where the
  ascent stops;
- **cpsat with and without them**: cpsat at ``--limit`` seconds a round,
  against wspt, once as shipped and once with the orders left out (the
  same code, ``GUIDED_BLENDS`` patched empty), one after the other on the
  same instance. Every decision is checked.
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest.mock import patch

from whale_opt.bounds import solve_lagrangian
from whale_opt.check import check
from whale_opt.cpsat import model
from whale_opt.decision import objective
from whale_opt.generate import generate
from whale_opt.placement.order_search import blend_orders, order_by_starts
from whale_opt.placement.serial import list_schedule
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance
from whale_opt.solve import solve

FAMILIES = ("hetero", "mixed", "dgx1", "fragmented")


def alone(instance: Instance, ascent_s: float) -> list[float]:
    """The list schedule of the guided order, unblended then blended with the greedy's
    as the round does (:data:`whale_opt.cpsat.model.GUIDED_BLENDS`), each against
    the greedy's (relative)."""
    order = wspt_order(instance)
    jobs = list_schedule(instance, order, prefer=WsptPolicy.prefer)
    greedy = objective(instance, jobs)
    relaxed = solve_lagrangian(instance, greedy, time.perf_counter() + ascent_s)
    guided = order_by_starts(instance, relaxed.starts, jobs, order)
    ratios = []
    for share, typed in ((1.0, False), *model.GUIDED_BLENDS):
        blended = blend_orders(order, guided, share)
        held = relaxed.types if typed else None
        schedule = list_schedule(instance, blended, prefer=WsptPolicy.prefer, types=held)
        ratios.append(objective(instance, schedule) / greedy - 1)
    return ratios


def against_wspt(instance: Instance, limit_s: float, guided: bool) -> float:
    """cpsat's objective against wspt's (relative), with or without the guided order."""
    wspt = solve(instance, "wspt").objective
    if guided:
        decision = solve(instance, "cpsat", time_limit_s=limit_s)
    else:
        with patch.object(model, "GUIDED_BLENDS", ()):
            decision = solve(instance, "cpsat", time_limit_s=limit_s)
    problems = check(instance, decision)
    if problems:
        raise SystemExit(f"{instance.name}: {problems[:3]}")
    return decision.objective / wspt - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--queued", type=int, default=500)
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--ascent", type=float, default=0.5, help="the ascent's seconds (alone)")
    parser.add_argument("--limit", type=float, default=5.0, help="cpsat's seconds a round")
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.seeds)
    shares = ", ".join(
        f"{share:g}{' typed' if typed else ''}"
        for share, typed in ((1.0, False), *model.GUIDED_BLENDS)
    )
    first = [
        f"| family | list schedule against the greedy's, mean over the seeds, blended {shares} |",
        "|---|---|",
    ]
    second = [
        f"| family | cpsat {args.limit:g} s against wspt, without the order | with it "
        "| mean without | mean with |",
        "|---|---|---|---|---|",
    ]
    for family in args.families.split(","):
        instances = [
            generate(family, gpus=args.gpus, queued=args.queued, seed=seed) for seed in seeds
        ]
        ratios = [alone(instance, args.ascent) for instance in instances]
        means = [statistics.mean(column) for column in zip(*ratios, strict=True)]
        first.append(f"| {family} | {' / '.join(f'{m:+.2%}' for m in means)} |")
        without, with_ = [], []
        for instance in instances:
            without.append(against_wspt(instance, args.limit, guided=False))
            with_.append(against_wspt(instance, args.limit, guided=True))
        second.append(
            f"| {family} | {' '.join(f'{r:+.2%}' for r in without)} "
            f"| {' '.join(f'{r:+.2%}' for r in with_)} "
            f"| {statistics.mean(without):+.2%} | {statistics.mean(with_):+.2%} |"
        )
        print(first[-1], second[-1], sep="\n", flush=True)
    print("", *first, "", *second, sep="\n")


if __name__ == "__main__":
    main()
