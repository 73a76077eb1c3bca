"""Where a round's objective and the replay's disagree: placements on Philly at 90% load.

Over the Philly replay (``bench/load_replays.py philly``: the first 400
>= 4-GPU jobs on a uniform sample of the cluster's nodes at 90% offered load)
frag-aware's weighted JCT is below wspt's, and frag-aware is wspt's own
order with another placement rule: the earliest start instead of the
earliest end. cpsat minimises each round's objective, so it can only take a
placement rule's gains over a replay if its rounds prefer that rule too.

This replays the trace once with wspt, keeping every round of two queued
jobs or more, samples ``--rounds`` of them evenly, and list-schedules each in
wspt's order with each placement preference (``end``: wspt's; ``frag-aware``:
the earliest start, then the least NVLink fragmentation; ``best-fit``: the
earliest start, then the fewest GPUs left free), comparing the rounds'
objectives. It also measures how far each wide job's actual start came after
its first planned one, and replays wspt with a price on each GPU-second of
one type (``policy.gpu_second_prices``; ``--priced-type``, ``--prices``):
what a round objective that prices the scarce type lets a rolling plan do.
Run ``python bench/round_vs_replay.py``; it writes ``bench/ROUND_VS_REPLAY.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from whale_opt.decision import Decision, objective
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.placement.serial import list_schedule
from whale_opt.policies.wspt import WsptPolicy, wspt_order
from whale_opt.problem_data import Instance
from whale_opt.sim import KeepRounds, SimConfig, TraceJob, simulate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from load_replays import TRACES, philly_sample  # noqa: E402 (a sibling script)

PREFERENCES = ("end", "frag-aware", "best-fit")


class FirstPlans:
    """wspt, noting when its first decision about each of ``jobs`` starts it."""

    name = "wspt"

    def __init__(self, jobs: set[str]) -> None:
        self.policy = WsptPolicy()
        self.jobs = jobs
        self.first: dict[str, int] = {}  # job -> its first planned (or actual) start

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        decision = self.policy.decide(instance, options)
        for item in decision.jobs:
            if item.id in self.jobs and item.start_s is not None and item.id not in self.first:
                self.first[item.id] = instance.now + item.start_s
        return decision


def priced_replay(
    trace: tuple[TraceJob, ...], cluster: Instance, config: SimConfig, gpu_type: str, price: float
) -> float:
    """wspt's replay (weighted JCT, seconds) with ``price`` on each GPU-second of
    ``gpu_type`` in the cluster's policy (``gpu_second_prices``)."""
    prices = {gpu_type: price} if price else {}
    priced = cluster.replace(policy=replace(cluster.policy, gpu_second_prices=prices))
    result = simulate(trace, priced, config, policy=WsptPolicy())
    return float(result.summary["weighted_jct_s"])


def slips(spy: FirstPlans, started: pd.Series) -> list[str]:
    """How far each wide job's actual start (``started``: first start by job id) came
    after the first one ``spy``'s rounds planned."""
    hours = sorted((started[job] - at) / 3600 for job, at in spy.first.items())
    return [
        f"Over wspt's replay, the {len(hours)} wide jobs' actual starts against the start"
        f" their first round planned: {sum(h <= 1 for h in hours)} within an hour, median"
        f" slip {statistics.median(hours):.1f} h, p90 {hours[int(0.9 * (len(hours) - 1))]:.1f} h,"
        f" max {hours[-1]:.1f} h.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=TRACES, help="the traces folder")
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--nodes-share", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=60, help="event-round batch seconds")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--priced-type", default="P40-24G", help="the type the experiment prices")
    parser.add_argument("--prices", default="0,0.1,0.25,1,5", help="experiment prices; '': skip")
    parser.add_argument("--out", type=Path, default=HERE / "ROUND_VS_REPLAY.md")
    args = parser.parse_args()
    started = time.perf_counter()
    trace, cluster, wide, setup = philly_sample(args)
    # One wspt replay gives both the rounds to sample and the wide jobs' first plans.
    spy = FirstPlans(wide)
    keep = KeepRounds(spy, least=2)
    config = SimConfig(
        round_period_s=None, round_batch_s=args.batch, seed=args.seed, check_decisions=True
    )
    replayed = simulate(trace, cluster, config, policy=keep)
    step = max(1, len(keep.rounds) // args.rounds)
    chosen = keep.rounds[::step][: args.rounds]
    rows = [
        "| round | queued | running | " + " | ".join(PREFERENCES[1:]) + " |",
        "|---|---|---|" + "---|" * (len(PREFERENCES) - 1),
    ]
    against: dict[str, list[float]] = {p: [] for p in PREFERENCES[1:]}
    for instance in chosen:
        order = wspt_order(instance)
        values = {
            p: objective(instance, list_schedule(instance, order, prefer=p)) for p in PREFERENCES
        }
        cells = []
        for p in PREFERENCES[1:]:
            against[p].append(values[p] / values["end"] - 1)
            cells.append(f"{against[p][-1]:+.2%}")
        rows.append(
            f"| {instance.name} | {len(instance.queue)} | {len(instance.running)} | "
            + " | ".join(cells)
            + " |"
        )
    lines = [
        "# Round objective against the replay's: placements on Philly",
        "",
        f"- command: `python bench/round_vs_replay.py --jobs {args.jobs} --rounds {args.rounds}`",
        *(f"- {line}" for line in setup),
        f"- {len(chosen)} of the replay's {len(keep.rounds)} rounds of two queued jobs or more"
        " (wspt deciding), evenly spaced",
        "",
        "Each round's objective list-scheduled in wspt's order with each placement"
        " preference, against the earliest end (wspt's own):",
        "",
        *rows,
        "",
    ]
    for p, changes in against.items():
        lines.append(
            f"- {p}: mean {statistics.mean(changes):+.2%}, lower in "
            f"{sum(c < -1e-9 for c in changes)} of {len(changes)} rounds, higher in "
            f"{sum(c > 1e-9 for c in changes)}"
        )
    lines += ["", *slips(spy, replayed.jobs.set_index("id")["first_start_s"])]
    if args.prices:
        lines += [
            "",
            f"wspt's replay with a price on each {args.priced_type} GPU-second"
            " (`policy.gpu_second_prices`, weighted seconds; 0: wspt itself):",
            "",
            "| price | weighted JCT h |",
            "|---|---|",
        ]
        for price in (float(p) for p in args.prices.split(",")):
            jct = priced_replay(trace, cluster, config, args.priced_type, price)
            lines.append(f"| {price:g} | {jct / 3600:.2f} |")
    lines += ["", f"Took {time.perf_counter() - started:.0f} s.", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
