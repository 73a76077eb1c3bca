"""Does a round end within its time limit? cpsat on generated rounds at short limits.

Run alone on an idle machine (about 3 minutes a code)::

    python bench/watchdog.py --out bench/WATCHDOG.md
    python bench/watchdog.py --before <clone of an older commit> --out bench/WATCHDOG.md

Each round (four families, 64-2,048 GPUs, 4-1,000 queued, ``seed=900``) is
decided once by ``wspt`` first, as a live scheduler's rounds find their
cluster's memos warm, then by ``cpsat`` at 0.1, 0.25, 0.5 and 1 s; two large
rounds (10,000 GPUs / 5,000 queued, 4,096 / 4,000) at 1, 2 and 5 s. A row gives
the wall time against the limit (the issue's watchdog: at most the limit and
10%), the objective, the queued jobs left to a later round for want of time,
the pools the round was split into, and the checker's verdict. With
``--before``, the same rounds run first with the code of that tree (each code
in a fresh interpreter), side by side.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from whale_opt.budget import TAIL_REASON
from whale_opt.check import check
from whale_opt.generate import generate
from whale_opt.solve import solve

FAMILIES = ("hetero", "mixed", "dgx1", "fragmented")
SIZES = ((64, 4), (64, 16), (128, 64), (256, 120), (512, 300), (1024, 500), (2048, 1000))
LIMITS = (0.1, 0.25, 0.5, 1.0)
LARGE = (("hetero", 10_000, 5000), ("dgx1", 4096, 4000))  # at LARGE_LIMITS
LARGE_LIMITS = (1.0, 2.0, 5.0)
SEED = 900
OVER = 1.1  # the watchdog's allowance: the limit and 10%


@dataclass(frozen=True)
class Row:
    """One round at one limit."""

    round: str
    limit: float
    wall: float
    objective: float
    tail: int  # queued jobs left to a later round for want of time
    pools: str  # "-": not split
    valid: bool  # the checker accepts the decision

    @property
    def over(self) -> bool:
        return self.wall > OVER * self.limit


def sweep() -> list[Row]:
    """One row per round and limit, solved by this interpreter's code."""
    logging.disable(logging.WARNING)
    rows: list[Row] = []
    rounds = [(f, g, q, LIMITS) for f in FAMILIES for g, q in SIZES]
    rounds += [(f, g, q, LARGE_LIMITS) for f, g, q in LARGE]
    for family, gpus, queued, limits in rounds:
        instance = generate(family, gpus=gpus, queued=queued, seed=SEED)
        solve(instance, "wspt")
        for limit in limits:
            tic = time.perf_counter()
            decision = solve(instance, "cpsat", time_limit_s=limit)
            wall = time.perf_counter() - tic
            rows.append(
                Row(
                    f"{family}-{gpus}-{queued}",
                    limit,
                    wall,
                    decision.objective,
                    sum(item.reason == TAIL_REASON for item in decision.jobs),
                    str(decision.stats.get("pools", "-")),
                    not check(instance, decision),
                )
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def _run(tree: Path) -> list[Row]:
    """The sweep with the code of ``tree``, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script = Path(__file__).resolve()
    out = subprocess.run(
        [sys.executable, str(script), "--json"], env=env, check=True, capture_output=True
    )
    return [Row(**row) for row in json.loads(out.stdout)]


def _summary(name: str, rows: list[Row]) -> str:
    over = sum(row.over for row in rows)
    worst = max(row.wall / row.limit for row in rows)
    invalid = sum(not row.valid for row in rows)
    return (
        f"{name}: {over} of {len(rows)} rounds past the limit and 10%"
        f" (worst {worst:.2f}x the limit); {invalid} decisions the checker rejects."
    )


def _wall(row: Row) -> str:
    return f"{row.wall:.3f}" + (" **over**" if row.over else "")


def report(after: list[Row], before: list[Row] | None) -> str:
    lines = [
        "# The watchdog: cpsat rounds against short limits",
        "",
        f"- machine: {platform.machine()}, Python {platform.python_version()}",
        "- command: `python bench/watchdog.py"
        + (" --before <clone>" if before else "")
        + " --out bench/WATCHDOG.md`",
        f"- rounds: `generate(family, gpus, queued, seed={SEED})`, decided once by wspt"
        " first (warm memos, as in a live scheduler); wall: the `solve` call",
        "",
    ]
    if before is not None:
        lines += [_summary("before", before), ""]
    lines += [_summary("now" if before else "this code", after), ""]
    if before is None:
        lines += [
            "| round | limit s | wall s | x limit | objective | left for lack of time | pools |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.round} | {r.limit:g} | {_wall(r)} | {r.wall / r.limit:.2f}"
            f" | {r.objective:.4g} | {r.tail} | {r.pools} |"
            for r in after
        ]
        return "\n".join(lines) + "\n"
    lines += [
        "| round | limit s | wall s, before | now | objective, before | now | change"
        " | left for lack of time, before | now | pools, before | now |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.round} | {r.limit:g} | {_wall(b)} | {_wall(r)} | {b.objective:.4g}"
        f" | {r.objective:.4g} | {r.objective / b.objective - 1:+.1%} | {b.tail} | {r.tail}"
        f" | {b.pools} | {r.pools} |"
        for b, r in zip(before, after, strict=True)
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="a tree with older code")
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    parser.add_argument("--json", action="store_true", help="print this code's rows as JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps([asdict(row) for row in sweep()]))
        return
    before = _run(args.before) if args.before is not None else None
    here = Path(__file__).resolve().parents[1]
    after = _run(here)
    text = report(after, before)
    if args.out is not None:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
