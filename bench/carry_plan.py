"""Over a replay, cpsat against wspt, with and without the previous round's plan as hint.

Run alone on an idle machine, from a clean clone::

    PYTHONPATH=<clone> python <clone>/bench/carry_plan.py           # writes bench/CARRY_PLAN.md
    python bench/carry_plan.py --families fragmented --jobs 100      # a quick look

Each family (:func:`whale_opt.sim.synthetic_cluster`, 256 GPUs, seed 0) gets a
synthetic trace of ``--jobs`` jobs compressed to ``--load``; event rounds
batched 60 s, cpsat ``--limit`` seconds a round (default preset), every
decision checked. ``cpsat`` carries each round's plan into the next
(``SimConfig.carry_plan=True``); ``cpsat-fresh`` starts every round from
scratch (the default: this comparison is why).
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
RUNS = (("wspt", "wspt", True), ("cpsat-fresh", "cpsat", False), ("cpsat", "cpsat", True))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--families", default="fragmented,dgx1,hetero,mixed")
    parser.add_argument("--load", type=float, default=1.5)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--limit", type=float, default=1.0, help="cpsat seconds a round")
    parser.add_argument("--out", type=Path, default=HERE / "CARRY_PLAN.md")
    args = parser.parse_args()
    rows = []
    started = time.perf_counter()
    for family in args.families.split(","):
        cluster = synthetic_cluster(256, family=family, seed=0)
        trace, _ = at_load(
            synthetic_trace(args.jobs, cluster, load=args.load, seed=0), cluster, args.load
        )
        values = {}
        for name, policy, carry in RUNS:
            config = SimConfig(
                policy=policy,
                time_limit_s=args.limit,
                round_period_s=None,
                round_batch_s=60,
                seed=0,
                check_decisions=True,
                carry_plan=carry,
            )
            tic = time.perf_counter()
            result = simulate(trace, cluster, config)
            values[name] = result.summary["weighted_jct_s"]
            wall = time.perf_counter() - tic
            print(f"{family:>11} {name:>12}: {values[name]:.0f} s, {wall:.0f} s wall", flush=True)
        wspt = values["wspt"]
        fresh, carried = values["cpsat-fresh"], values["cpsat"]
        rows.append(
            f"| {family} | {wspt:.0f} | {fresh:.0f} ({fresh / wspt - 1:+.1%})"
            f" | {carried:.0f} ({carried / wspt - 1:+.1%}) |"
        )
    lines = [
        "# cpsat over a replay, with the previous round's plan carried",
        "",
        f"- command: `python bench/carry_plan.py --families {args.families} --load {args.load:g}"
        f" --jobs {args.jobs} --limit {args.limit:g}`",
        f"- machine: {platform.machine()}, Python {platform.python_version()},"
        f" OR-Tools {ortools.__version__}; one run, {time.perf_counter() - started:.0f} s",
        f"- {args.jobs} synthetic jobs a family on 256 GPUs at {args.load:.0%} offered load;"
        f" event rounds batched 60 s; cpsat {args.limit:g} s a round; every decision checked",
        "",
        "Weighted JCT (s), and against wspt:",
        "",
        "| family | wspt | cpsat, each round fresh | cpsat, plan carried |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
