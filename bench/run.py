"""Round-solver benchmark: whale_opt's CP-SAT round against the WSPT greedy.

Run ``python bench/run.py`` (or ``make bench``) on an otherwise idle machine;
it writes ``bench/ROUNDS.md``. Every decision is checked with the public
checker; a failed check aborts the run. Studies:

- ``families``: ~1,000 GPUs / 500 queued / ~300-400 running, hetero and
  fragmented families, 5 seeds each, 5 s limit.
- ``small``: 128 GPUs / 64 queued, 20 seeds over four families, 0.5 s limit.
- ``scale``: 10,000 GPUs / 5,000 queued, 30 s limit (pools in parallel).
- ``determinism``: the ``deterministic`` preset, 10 reruns of one instance.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import ortools

from whale_opt.check import check
from whale_opt.cpsat.model import CpSatPolicy
from whale_opt.decision import Decision
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance
from whale_opt.solve import solve

HERE = Path(__file__).resolve().parent


def _checked(instance: Instance, decision: Decision) -> Decision:
    violations = check(instance, decision)
    if violations:
        raise SystemExit(f"{instance.name}: {decision.solver} broke the rules: {violations[:3]}")
    return decision


def _round(
    instance: Instance, solver: str, limit_s: float, preset: str | None = None
) -> tuple[Decision, float]:
    started = time.perf_counter()
    decision = solve(instance, solver, preset=preset, time_limit_s=limit_s)
    return _checked(instance, decision), time.perf_counter() - started


def families(seeds: int) -> list[str]:
    """~1,000 GPUs: improvement over the greedy, gap, wall time, first decision."""
    rows = [
        "| instance | greedy obj | greedy s (first decision) | cpsat obj | better than greedy | "
        "bound | gap | status | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    gaps, gains = [], []
    for family in ("hetero", "fragmented"):
        for seed in range(seeds):
            inst = generate(family, gpus=1024, queued=500, seed=seed)
            greedy, greedy_s = _round(inst, "wspt", 5.0)
            best, wall = _round(inst, "cpsat", 5.0)
            gain = (greedy.objective - best.objective) / greedy.objective
            gains.append(gain)
            gaps.append(best.gap)
            if best.objective > greedy.objective + 1e-6:
                raise SystemExit(f"{inst.name}: cpsat worse than the greedy")
            rows.append(
                f"| {inst.name} | {greedy.objective:.4g} | {greedy_s:.2f} | {best.objective:.4g} | "
                f"{gain:.2%} | {best.bound:.4g} | {best.gap:.1%} | {best.status.value} | "
                f"{wall:.2f} |"
            )
    rows.append("")
    rows.append(
        f"Median gain over the greedy {statistics.median(gains):.2%} (min {min(gains):.2%}, "
        f"max {max(gains):.2%}); median gap to the lower bound {statistics.median(gaps):.1%}; "
        f"never worse than the greedy: {sum(g >= -1e-12 for g in gains)}/{len(gains)}."
    )
    return rows


def small(cases: int) -> list[str]:
    """128 GPUs / 64 queued at a 0.5 s limit: wall-time percentiles, proven optima."""
    walls, optimal, gains = [], 0, []
    names = ("mixed", "dgx1", "hetero", "fragmented")
    for k in range(cases):
        inst = generate(names[k % 4], gpus=128, queued=64, seed=100 + k)
        greedy, _ = _round(inst, "wspt", 0.5)
        best, wall = _round(inst, "cpsat", 0.5)
        walls.append(wall)
        optimal += best.status.value == "optimal"
        gains.append((greedy.objective - best.objective) / greedy.objective)
    walls.sort()
    p95 = walls[min(len(walls) - 1, int(0.95 * len(walls)))]
    return [
        "| cases | wall p50 s | wall p95 s | wall max s | proven optimal "
        "| median gain over greedy |",
        "|---|---|---|---|---|---|",
        f"| {cases} | {statistics.median(walls):.3f} | {p95:.3f} | {walls[-1]:.3f} | "
        f"{optimal}/{cases} | {statistics.median(gains):.2%} |",
    ]


def scale() -> list[str]:
    """10,000 GPUs / 5,000 queued, 30 s: the split into pools, checked."""
    inst = generate("hetero", gpus=10_000, queued=5_000, seed=0)
    rows = ["| solver | objective | bound | gap | wall s |", "|---|---|---|---|---|"]
    for solver in ("wspt", "cpsat"):
        decision, wall = _round(inst, solver, 30.0)
        rows.append(
            f"| {solver} | {decision.objective:.4g} | {decision.bound:.4g} | "
            f"{decision.gap:.1%} | {wall:.1f} |"
        )
    return rows


def determinism(reruns: int) -> list[str]:
    """The deterministic preset gives the same decision on every rerun."""
    inst = generate("fragmented", gpus=256, queued=120, seed=7)
    seen: Counter[tuple[float, tuple[object, ...]]] = Counter()
    walls = []
    for _ in range(reruns):
        started = time.perf_counter()
        decision = _checked(
            inst, CpSatPolicy("deterministic").decide(inst, SolveOptions(time_limit_s=60.0))
        )
        walls.append(time.perf_counter() - started)
        seen[(decision.objective, decision.jobs)] += 1
    same = seen.most_common(1)[0][1]
    return [
        "| instance | reruns | identical decisions | wall s (mean) |",
        "|---|---|---|---|",
        f"| {inst.name} | {reruns} | {same}/{reruns} | {statistics.mean(walls):.2f} |",
    ]


def machine() -> list[str]:
    """Where the figures come from."""
    return [
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        f"- Python {platform.python_version()}, OR-Tools {ortools.__version__}",
        f"- command: `python bench/run.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}`",
        "- instances: `whale_opt.generate.generate(family, gpus, queued, seed)`, seeds as listed",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per ~1,000-GPU family")
    parser.add_argument("--small", type=int, default=20, help="128-GPU cases")
    parser.add_argument("--skip-scale", action="store_true", help="skip the 10,000-GPU round")
    parser.add_argument("-o", "--output", type=Path, default=HERE / "ROUNDS.md")
    args = parser.parse_args()
    sections = [
        "# Round solver benchmark",
        "",
        *machine(),
        "",
        "## ~1,000 GPUs / 500 queued, 5 s limit",
        "",
        *families(args.seeds),
        "",
        "## 128 GPUs / 64 queued, 0.5 s limit",
        "",
        *small(args.small),
        "",
    ]
    if not args.skip_scale:
        sections += ["## 10,000 GPUs / 5,000 queued, 30 s limit", "", *scale(), ""]
    sections += ["## Determinism (`--preset deterministic`)", "", *determinism(10), ""]
    text = "\n".join(sections)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
