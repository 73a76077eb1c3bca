"""The round cost model against measured list schedules, and split rounds whose pools hang.

Run alone on an idle machine (about 5 minutes here)::

    python bench/cost_model.py --out bench/COST_MODEL.md

1. The list schedule (:func:`whale_opt.solve.wspt_greedy`) of whole rounds and of
   pools of 128 GPUs cut from them, timed, against
   :func:`whale_opt.budget.round_cost`'s prediction: what splits a round, cuts a
   queue to its head, and sizes each pool's share of the limit.
2. Split rounds whose every pool hangs (a pool solve that never answers): each
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

from whale_opt.budget import _pairs, round_cost
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
from whale_opt.problem_data import Instance
from whale_opt.solve import wspt_greedy

FAMILIES = ("hetero", "dgx1", "fragmented", "mixed")
WHOLE = [(f, g, q) for f in FAMILIES for g in (128, 512, 2048) for q in (500, 2000)]
LARGE = [("hetero", 4096, 2000), ("fragmented", 4096, 3000), ("hetero", 10_000, 5000)]
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
    pairs = sum(_pairs(instance))
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
    for family, gpus, queued in [] if args.hung_only else WHOLE + LARGE:
        instance = generate(family, gpus=gpus, queued=queued, seed=7)
        rows.append(_row(f"{family}-{gpus}-{queued}", instance))
        if gpus > POOL_GPUS:
            for k, sub in enumerate(_pool_instances(instance, 2)):
                rows.append(_row(f"{family}-{gpus}-{queued} pool {k}", sub))
        print(rows[-1][0], flush=True)
    ratios = [measured / predicted for *_, measured, predicted in rows] or [1.0, 1.0]
    deciles = statistics.quantiles(ratios, n=10)

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
        f"measured / predicted over {len(ratios)} list schedules: median"
        f" {statistics.median(ratios):.2f}, 80% within {deciles[0]:.2f}-{deciles[-1]:.2f},"
        f" min {min(ratios):.2f}, max {max(ratios):.2f}.",
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
