"""The Lagrangian bound over a panel of generated rounds: its gap to the greedy.

The ascent is chaotic (a change of 1e-12 in one step moves a converged bound
by a point), so a change to it is judged over many rounds, not one: the four
generated families at 128 GPUs / 64 queued and 256 / 120 (seeds 0-2), and
1,024 / 500 (seeds 500-501), 32 rounds. For each, the greedy's (wspt)
objective is the ascent's target, and the bound gets ``--budget`` seconds;
printed: its gap to the greedy, the analytic bound's, and the time taken.

    PYTHONPATH=<clone> python <clone>/bench/ascent_panel.py --budget 0.5
"""

from __future__ import annotations

import argparse
import statistics
import time

from whale_opt.bounds import lower_bound, solve_lagrangian
from whale_opt.generate import generate
from whale_opt.solve import solve

FAMILIES = ("hetero", "mixed", "dgx1", "fragmented")
SIZES = (
    *((128, 64, seed) for seed in range(3)),
    *((256, 120, seed) for seed in range(3)),
    *((1024, 500, seed) for seed in (500, 501)),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.5, help="seconds for each bound")
    args = parser.parse_args()
    print("| round | Lagrangian gap | analytic gap | time s |")
    print("|---|---|---|---|")
    gaps = []
    for family in FAMILIES:
        for gpus, queued, seed in SIZES:
            instance = generate(family, gpus=gpus, queued=queued, seed=seed)
            upper = solve(instance, "wspt").objective
            analytic = lower_bound(instance)
            tic = time.perf_counter()
            bound = solve_lagrangian(instance, upper, tic + args.budget).bound
            took = time.perf_counter() - tic
            gap = (upper - bound) / upper
            gaps.append(gap)
            print(
                f"| {family} {gpus} / {seed} | {gap:.2%} | {(upper - analytic) / upper:.2%} "
                f"| {took:.2f} |",
                flush=True,
            )
    print()
    print(
        f"Over {len(gaps)} rounds: mean gap {statistics.mean(gaps):.2%}, "
        f"median {statistics.median(gaps):.2%}."
    )


if __name__ == "__main__":
    main()
