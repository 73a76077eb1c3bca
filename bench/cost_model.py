"""The round cost model against measured list schedules, and split rounds whose pools hang.

Run alone on an idle machine (about 5 minutes here)::

    python bench/cost_model.py --out bench/COST_MODEL.md

1. The list schedule (:func:`whale_opt.solve.wspt_greedy`) of whole rounds and of
   pools of 128 GPUs cut from them, timed, against
   :func:`whale_opt.budget.round_cost`'s prediction: what splits a round, cuts a
   queue to its head, and sizes each pool's share of the limit.
2. The analytic bound (:func:`whale_opt.bounds.reported_bound`) of the same whole
   rounds against its prediction: what decides whether a round reports it.
3. Large rounds solved by ``cpsat`` at 1, 2 and 5 s: the wall time against the
   limit, the pools, and the jobs left to a later round for want of time.
4. Split rounds whose every pool hangs (a pool solve that never answers): each
   pool is decided by the greedy here, and the round must still end within its
   limit (:mod:`whale_opt.decompose.split`).
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import time
from pathlib import Path

from whale_opt.bounds import reported_bound
from whale_opt.budget import TAIL_REASON, round_cost
from whale_opt.decision import Decision
from whale_opt.decompose import (
    pools,
    preemption_shares,
    quota_shares,
    running_gpus_by_pool,
    solve_split,
    sub_instance,
)
from whale_opt.executors import LocalExecutor
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.placement.eligibility import eligible_counts
from whale_opt.problem_data import Instance
from whale_opt.solve import solve, wspt_greedy

FAMILIES = ("hetero", "dgx1", "fragmented", "mixed")
WHOLE = [(f, g, q) for f in FAMILIES for g in (128, 512, 2048) for q in (500, 2000)]
LARGE = [("hetero", 4096, 2000), ("fragmented", 4096, 3000), ("hetero", 10_000, 5000)]
SOLVED = [
    ("hetero", 1024, 2000),
    ("dgx1", 2048, 3000),
    ("mixed", 1024, 3000),
    ("hetero", 4096, 4000),
]
HUNG = [("hetero", 512, 2000, 3.0), ("hetero", 512, 4000, 4.0), ("mixed", 1024, 3000, 2.0)]
POOL_GPUS = 128


def _pool_instances(instance: Instance, count: int) -> list[Instance]:
    """The first ``count`` busy pools of ``instance`` cut at :data:`POOL_GPUS`, as instances."""
    parts = pools(instance, POOL_GPUS)
    shares = quota_shares(instance, parts)
    caps = preemption_shares(instance, parts)
    inside = running_gpus_by_pool(instance, parts)
    busy = [k for k, pool in enumerate(parts) if pool.jobs][:count]
    return [
        sub_instance(instance, parts[k], {n: s[k] for n, s in shares.items()}, caps[k], inside[k])
        for k in busy
    ]


def _row(name: str, instance: Instance) -> tuple[str, int, int, int, float, float]:
    pairs = sum(eligible_counts(instance))
    predicted = round_cost(instance).greedy_s
    tic = time.perf_counter()
    wspt_greedy(instance)
    return (
        name,
        len(instance.queue),
        len(instance.nodes),
        pairs,
        time.perf_counter() - tic,
        predicted,
    )


def _spread(what: str, ratios: list[float]) -> str:
    """The spread of measured / predicted, as a sentence."""
    if len(ratios) < 2:
        return ""
    deciles = statistics.quantiles(ratios, n=10)
    return (
        f"measured / predicted over {len(ratios)} {what}: median {statistics.median(ratios):.2f},"
        f" 80% within {deciles[0]:.2f}-{deciles[-1]:.2f}, min {min(ratios):.2f},"
        f" max {max(ratios):.2f}."
    )


def _solved() -> list[str]:
    """A table row per large round and limit, solved by cpsat."""
    lines = []
    for family, gpus, queued in SOLVED:
        instance = generate(family, gpus=gpus, queued=queued, seed=11)
        for limit in (1.0, 2.0, 5.0):
            tic = time.perf_counter()
            decision = solve(instance, "cpsat", time_limit_s=limit)
            wall = time.perf_counter() - tic
            tail = sum(item.reason == TAIL_REASON for item in decision.jobs)
            pools = decision.stats.get("pools", "-")
            lost = decision.stats.get("pools_fallback", "-")
            lines.append(
                f"| {family}-{gpus}-{queued} | {limit:g} | {wall:.2f} | {pools} | {lost} | {tail} |"
            )
            print(lines[-1], flush=True)
    return lines


def _never_answers(instance: Instance, options: SolveOptions) -> Decision:
    time.sleep(120)
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    parser.add_argument("--hung-only", action="store_true", help="only the hung split rounds")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # each hung pool logs its fallback

    rows = []
    bounds = []
    for family, gpus, queued in [] if args.hung_only else WHOLE + LARGE:
        instance = generate(family, gpus=gpus, queued=queued, seed=7)
        rows.append(_row(f"{family}-{gpus}-{queued}", instance))
        tic = time.perf_counter()
        reported_bound(instance)
        bounds.append((rows[-1][0], time.perf_counter() - tic, round_cost(instance).bound_s))
        if gpus > POOL_GPUS:
            for k, sub in enumerate(_pool_instances(instance, 2)):
                rows.append(_row(f"{family}-{gpus}-{queued} pool {k}", sub))
        print(rows[-1][0], flush=True)
    ratios = [measured / predicted for *_, measured, predicted in rows]

    lines = [
        "# The round cost model, and split rounds whose pools hang",
        "",
        f"- machine: {platform.machine()}, Python {platform.python_version()}",
        "- command: `python bench/cost_model.py --out bench/COST_MODEL.md`",
        "",
        "## The list schedule: measured against predicted",
        "",
        f"Whole rounds (`generate(family, gpus, queued, seed=7)`) and their first two"
        f" pools of {POOL_GPUS} GPUs.",
        "",
        "| round | queued | nodes | pairs | measured s | predicted s | measured / predicted |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, queued, nodes, pairs, measured, predicted in rows:
        lines.append(
            f"| {name} | {queued} | {nodes} | {pairs} | {measured:.3f} | {predicted:.3f}"
            f" | {measured / predicted:.2f} |"
        )
    lines += [
        "",
        _spread("list schedules", ratios),
        "",
        "## The analytic bound: measured against predicted",
        "",
        "| round | measured s | predicted s | measured / predicted |",
        "|---|---|---|---|",
        *(f"| {n} | {m:.3f} | {p:.3f} | {m / p:.2f} |" for n, m, p in bounds),
        "",
        _spread("bounds", [m / p for _, m, p in bounds]),
        "",
        "## Large rounds: the wall time against the limit",
        "",
        "`solve(instance, 'cpsat', time_limit_s=L)`, `generate(family, gpus, queued, seed=11)`;"
        " left to a later round: queued jobs not planned for want of time.",
        "",
        "| round | limit s | wall s | pools | decided by the greedy | left to a later round |",
        "|---|---|---|---|---|---|",
        *([] if args.hung_only else _solved()),
        "",
        "## Split rounds whose every pool hangs",
        "",
        "`solve_split` with `wspt` pools of 128 GPUs on two local workers, each pool"
        " solve sleeping past the round; every pool is decided by the greedy in the"
        " leader.",
        "",
        "| round | limit s | pools | decided by the greedy | wall s | within the limit |",
        "|---|---|---|---|---|---|",
    ]
    for family, gpus, queued, limit in HUNG:
        instance = generate(family, gpus=gpus, queued=queued, seed=3)
        local = LocalExecutor(2)
        try:
            decision = solve_split(
                instance,
                _never_answers,
                "wspt",
                SolveOptions(time_limit_s=limit),
                max_gpus=POOL_GPUS,
                executor=local,
                workers=2,
            )
        finally:
            local.shutdown(wait=False)
        lines.append(
            f"| {family}-{gpus}-{queued} | {limit:g} | {decision.stats['pools']}"
            f" | {decision.stats['pools_fallback']} | {decision.wall_s:.2f}"
            f" | {'yes' if decision.wall_s <= limit else 'no'} |"
        )
        print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
