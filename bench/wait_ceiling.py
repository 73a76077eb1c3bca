"""Wait ceiling benchmark (issue 17): WSPT on a Gavel-style stream, overloaded and
below capacity, with and without the ceiling and aging.

Run alone on an idle machine::

    .venv/bin/python bench/wait_ceiling.py --check      # writes bench/WAIT_CEILING.md
    .venv/bin/python bench/wait_ceiling.py --quick --out /tmp/ceiling

The cluster is Gavel's 36 V100 + 36 P100 + 36 K80 (4-GPU PCIe nodes of the
converters' V100-16G, P100-16G and K80-12G types). The stream is Gavel's
single-GPU workload: Poisson arrivals (``--rates``, jobs an hour, a table
each), each job a random Gavel job class (26 single-GPU models) and a V100
run time drawn as Gavel draws it (80%: 10^U(1.5, 3) minutes, 20%:
10^U(3, 4) minutes); the durations on P100 and K80 follow the measured
throughputs (``whale_opt.convert.with_gavel_speeds``). Weights are all 1,
so the weighted JCT is the mean JCT.

The figures are over the first ``--first`` jobs while the stream goes on
(``--jobs`` in all), and over the whole stream; the run lasts until every
job is done. "Starved" counts jobs of the first ones that had not started
when the last job arrived. The fluid capacity is the largest arrival rate a
fractional, throughput-optimal assignment of the job classes to GPU types
could serve (a linear program).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import ortools
import pandas as pd

from whale_opt.convert import read_gavel
from whale_opt.convert.gavel import GavelThroughputs
from whale_opt.convert.gavel_stream import fluid_capacity_per_h, gavel_cluster, stream
from whale_opt.problem_data import Instance, Policy
from whale_opt.sim import SimConfig, simulate

HERE = Path(__file__).resolve().parent
THROUGHPUTS = (
    HERE.parents[1] / "shared" / "data" / "traces" / "gavel" / "simulation_throughputs.json"
)
HOUR = 3600.0


@dataclass(frozen=True)
class Setting:
    """One run: a label and the round policy (ceiling and aging)."""

    label: str
    policy: Policy


SETTINGS = (
    Setting("before (no ceiling, no aging)", Policy(max_wait_s=None, aging_per_hour=0.0)),
    Setting("aging 0.05/h only", Policy(max_wait_s=None)),
    Setting("ceiling 24 h only", Policy(aging_per_hour=0.0)),
    Setting("defaults (ceiling 24 h, aging 0.05/h)", Policy()),
)


def figures(jobs: pd.DataFrame, first: int, last_arrival_s: int, ceiling_s: int) -> dict:  # type: ignore[type-arg]
    """The first ``first`` jobs' wait and JCT figures."""
    head = jobs.sort_values("submit_s").head(first)
    wait = head["queue_delay_s"].fillna(head["waited_s"])
    started = head["first_start_s"].fillna(math.inf)
    done = head[head["status"] == "completed"]
    return {
        "max_wait_h": wait.max() / HOUR,
        "p99_wait_h": wait.quantile(0.99) / HOUR,
        "over_ceiling": int((wait > ceiling_s).sum()),
        "starved": int((started > last_arrival_s).sum()),
        "completed": len(done),
        "mean_jct_h": done["jct_s"].mean() / HOUR,
        "weighted_jct_h": _weighted_jct_h(head),
        "max_wait_all_h": jobs["queue_delay_s"].fillna(jobs["waited_s"]).max() / HOUR,
        "weighted_jct_all_h": _weighted_jct_h(jobs),
    }


def _weighted_jct_h(jobs: pd.DataFrame) -> float:
    done = jobs[jobs["status"] == "completed"]
    return float((done["jct_s"] * done["weight"]).sum() / done["weight"].sum() / HOUR)


def _change(value: float, reference: float) -> str:
    return f"{value / reference - 1:+.1%}"


HEAD = (
    "| setting | max wait h | p99 wait h | waits > 24 h | starved while arrivals go on |"
    " completed | mean JCT h | weighted JCT h | vs before | vs aging only |"
    " all jobs: max wait h | weighted JCT h | vs before | vs aging only | sim wall s |"
)


def row(label: str, f: dict, base: dict, aged: dict, first: int, wall: float) -> str:  # type: ignore[type-arg]
    """One setting's line: its figures, and its weighted JCTs against the first two settings."""
    head, whole = "weighted_jct_h", "weighted_jct_all_h"
    return (
        f"| {label} | {f['max_wait_h']:.1f} | {f['p99_wait_h']:.1f} |"
        f" {f['over_ceiling']} | {f['starved']} | {f['completed']}/{first} |"
        f" {f['mean_jct_h']:.2f} | {f[head]:.2f} |"
        f" {_change(f[head], base[head])} | {_change(f[head], aged[head])} |"
        f" {f['max_wait_all_h']:.1f} | {f[whole]:.2f} |"
        f" {_change(f[whole], base[whole])} | {_change(f[whole], aged[whole])} | {wall:.0f} |"
    )


def run(
    args: argparse.Namespace, cluster: Instance, table: GavelThroughputs, rate: float
) -> list[str]:
    """The table of every setting on one stream of ``rate`` jobs an hour."""
    trace = stream(cluster, table, args.jobs, rate, args.seed)
    rows = [HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    found: dict[str, dict] = {}  # type: ignore[type-arg]
    config = SimConfig(
        policy=args.policy,
        round_period_s=None,
        round_batch_s=args.batch,
        seed=args.seed,
        check_decisions=args.check,
    )
    for setting in SETTINGS:
        tic = time.perf_counter()
        result = simulate(trace, cluster.replace(policy=setting.policy), config)
        wall = time.perf_counter() - tic
        print(f"{rate:g} jobs/h, {setting.label:>40}: {wall:6.1f} s wall", flush=True)
        f = figures(result.jobs, args.first, trace[-1].submit_s, 86_400)
        found[setting.label] = f
        base = found[SETTINGS[0].label]
        aged = found.get(SETTINGS[1].label, f)
        rows.append(row(setting.label, f, base, aged, args.first, wall))
    return [*rows, "", *targets(found[SETTINGS[-1].label], found[SETTINGS[1].label], args.first)]


def targets(defaults: dict, aged: dict, first: int) -> list[str]:  # type: ignore[type-arg]
    """Issue 17's targets, met or missed: the defaults against aging without the ceiling."""

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    head, whole = (defaults[k] / aged[k] - 1 for k in ("weighted_jct_h", "weighted_jct_all_h"))
    return [
        f"- target: no job of the first {first} waits longer than the ceiling (24 h):"
        f" {verdict(defaults['over_ceiling'] == 0)} (longest {defaults['max_wait_h']:.1f} h,"
        f" {defaults['over_ceiling']} jobs past 24 h)",
        "- target: the defaults' weighted JCT at most 3% above the same policy without the"
        f" ceiling (aging only): first {first} {head:+.1%} ({verdict(head <= 0.03)}),"
        f" whole stream {whole:+.1%} ({verdict(whole <= 0.03)})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run, seconds")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--throughputs", type=Path, default=THROUGHPUTS)
    parser.add_argument("--per-type", type=int, default=36, help="GPUs of each type")
    parser.add_argument("--rates", default="8,5.5", help="arrivals per hour, one table each")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the stream")
    parser.add_argument("--first", type=int, default=300, help="jobs the figures cover")
    parser.add_argument("--policy", default="wspt")
    parser.add_argument("--batch", type=int, default=60, help="event-round batch seconds")
    parser.add_argument("--check", action="store_true", help="check every round's decision")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.per_type, args.jobs, args.first, args.rates = 4, 40, 20, "1"
    started = time.perf_counter()
    table = read_gavel(args.throughputs)
    cluster = gavel_cluster(args.per_type)
    capacity = fluid_capacity_per_h(cluster, table)
    lines = [
        "# Wait ceiling and aging on a heterogeneous stream",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}; "
        f"Python {platform.python_version()}, OR-Tools {ortools.__version__}",
        f"- command: `{' '.join(['python bench/wait_ceiling.py', *sys.argv[1:]])}`",
        f"- cluster: {args.per_type} V100-16G + {args.per_type} P100-16G + {args.per_type}"
        f" K80-12G (4-GPU PCIe nodes); fluid capacity {capacity:.2f} jobs/h",
        f"- stream: {args.jobs} single-GPU jobs, Poisson arrivals, Gavel classes and V100 run"
        f" times, seed {args.seed}; figures over the first {args.first}; policy"
        f" `{args.policy}`, event rounds batched {args.batch} s"
        + ("; every decision checked" if args.check else ""),
    ]
    for rate in (float(r) for r in args.rates.split(",")):
        lines += ["", f"## {rate:g} jobs/h ({rate / capacity:.0%} of the fluid capacity)", ""]
        lines += run(args, cluster, table, rate)
    lines += [
        "",
        "A wait is first start - submit (a job never started counts its wait so far);"
        " 'starved' counts jobs of the first ones not started when the last job arrived;"
        " 'vs' compares the weighted JCT; the 'all jobs' columns cover the whole stream.",
        "",
        f"Took {time.perf_counter() - started:.0f} s.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "WAIT_CEILING.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
