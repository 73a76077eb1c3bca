"""Over whole replays, cpsat against wspt, family by family and seed by seed.

Run alone on an idle machine, from a clean clone::

    PYTHONPATH=<clone> python <clone>/bench/versus_wspt.py          # writes bench/VERSUS_WSPT.md
    python bench/versus_wspt.py --families dgx1 --seeds 1 --jobs 100  # a quick look
    python bench/versus_wspt.py --seeds 1 --carried --out bench/CARRY_PLAN.md

Each family (:func:`whale_opt.sim.synthetic_cluster`, 256 GPUs, seed 0) gets
``--seeds`` synthetic traces of ``--jobs`` jobs (trace seeds 0, 1, ...)
compressed to ``--load``; event rounds batched 60 s, cpsat ``--limit``
seconds a round (default preset), every decision checked. One round's
decision is optimised for that round; whether that adds up over a replay,
where plans are redone as jobs arrive, is what this measures. ``--carried``
adds cpsat with each round's plan carried into the next as its hint
(``SimConfig.carry_plan``; off by default, and this comparison is why).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import ortools

from whale_opt.sim import SimConfig, simulate, synthetic_cluster, synthetic_trace
from whale_opt.sim.load import at_load

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--families", default="fragmented,dgx1,hetero,mixed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--load", type=float, default=1.5)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--limit", type=float, default=1.0, help="cpsat seconds a round")
    parser.add_argument("--carried", action="store_true", help="also cpsat, plan carried")
    parser.add_argument("--preset", default=None, help="cpsat's preset (default: default)")
    parser.add_argument("--out", type=Path, default=HERE / "VERSUS_WSPT.md")
    args = parser.parse_args()
    runs = [("wspt", "wspt", False), ("cpsat", "cpsat", False)]
    if args.carried:
        runs.append(("cpsat-carried", "cpsat", True))
    names = [name for name, _, _ in runs]
    uses = [f"{name} GPU use" for name in names]
    rows = []
    started = time.perf_counter()
    worse = 0
    for family in args.families.split(","):
        cluster = synthetic_cluster(256, family=family, seed=0)
        for seed in range(args.seeds):
            trace, _ = at_load(
                synthetic_trace(args.jobs, cluster, load=args.load, seed=seed), cluster, args.load
            )
            summaries = {}
            for name, policy, carry in runs:
                config = SimConfig(
                    policy=policy,
                    time_limit_s=args.limit,
                    round_period_s=None,
                    round_batch_s=60,
                    seed=0,
                    check_decisions=True,
                    carry_plan=carry,
                    preset=args.preset if policy == "cpsat" else None,
                )
                tic = time.perf_counter()
                summaries[name] = simulate(trace, cluster, config).summary
                print(
                    f"{family:>11} {seed} {name:>13}:"
                    f" {summaries[name]['weighted_jct_s']:.0f} s,"
                    f" {time.perf_counter() - tic:.0f} s wall",
                    flush=True,
                )
            wspt = summaries["wspt"]["weighted_jct_s"]
            worse += summaries["cpsat"]["weighted_jct_s"] > wspt
            cells = [f"{wspt:.0f}"]
            for name, _, _ in runs[1:]:
                value = summaries[name]["weighted_jct_s"]
                cells.append(f"{value:.0f} ({value / wspt - 1:+.1%})")
            cells += [f"{summaries[name]['gpu_utilisation']:.1%}" for name, _, _ in runs]
            rows.append(f"| {family} | {seed} | {' | '.join(cells)} |")
    lines = [
        "# cpsat against wspt over whole replays",
        "",
        f"- command: `python bench/versus_wspt.py --families {args.families} --seeds"
        f" {args.seeds} --load {args.load:g} --jobs {args.jobs} --limit {args.limit:g}"
        + (" --carried" if args.carried else "")
        + (f" --preset {args.preset}`" if args.preset else "`"),
        f"- machine: {platform.machine()}, Python {platform.python_version()},"
        f" OR-Tools {ortools.__version__}; one run, {time.perf_counter() - started:.0f} s",
        f"- {args.jobs} synthetic jobs a trace on 256 GPUs at {args.load:.0%} offered load;"
        f" event rounds batched 60 s; cpsat {args.limit:g} s a round; every decision checked",
        "",
        "Weighted JCT (s), against wspt, and the GPUs allocated over the replay:",
        "",
        f"| family | trace seed | {' | '.join(names)} | {' | '.join(uses)} |",
        "|---|---|" + "---|" * (2 * len(runs)),
        *rows,
        "",
        f"cpsat worse than wspt in {worse} of {len(rows)} replays.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
