"""Exact rounds and the bound: how often cpsat proves a round, how fast, and the gap.

Run ``python bench/exact.py`` on an otherwise idle machine (from a clean
clone: ``PYTHONPATH=<clone> python <clone>/bench/exact.py``); it writes
``bench/EXACT.md``. Seeds start at 500: none of them was used while tuning.
Every decision goes through the public checker; a violation aborts the run.

- ``small``: rounds of 1, 4, 8, 12 and 16 queued jobs on 64, 128 and 256 GPUs of the
  four generated families, cpsat with a 5 s limit: share proven optimal, wall
  time (p50, p95) and, for 1-job rounds, the solve time.
- ``medium``: 128 GPUs / 64 queued, 20 seeds, 5 s: share proven, p95 wall.
- ``table``: the issue's three instances (greedy, cpsat 5 s, cpsat 30 s,
  bound, gap against it).
- ``large``: 1,024 GPUs / 500 queued in each family (seeds from 500), cpsat
  5 s (or each of ``--large-limits``): its gap to the reported bound (median),
  its objective and the bound against wspt.
- ``symmetry``: the whole round's model of replay rounds of at most 20 queued
  jobs, alike idle nodes offered as prefixes and every node offered: its
  choices and CP-SAT's time to prove it.
- ``replay``: rounds of the synthetic replay (``bench/sim_bench.py``'s
  1,008-GPU cluster and trace, decided by wspt), sampled evenly: the greedy's
  gap to the analytic bound and to the Lagrangian one, the Lagrangian's
  time, and cpsat's reported gap at 2 s a round.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from unittest.mock import patch

import ortools

from whale_opt.bounds import lagrangian_bound, lower_bound
from whale_opt.check import check
from whale_opt.cpsat import neighbourhood
from whale_opt.cpsat.cpmodel import solve_neighbourhood
from whale_opt.cpsat.lns import whole_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.cpsat.symmetry import Interchangeable
from whale_opt.decision import Decision, Status
from whale_opt.generate import generate
from whale_opt.policies.wspt import WsptPolicy
from whale_opt.problem_data import Instance
from whale_opt.sim import KeepRounds, SimConfig, simulate, synthetic_cluster, synthetic_trace
from whale_opt.solve import solve, wspt_greedy

HERE = Path(__file__).resolve().parent
FAMILIES = ("hetero", "mixed", "dgx1", "fragmented")
SEED = 500
QUEUED = (1, 4, 8, 12, 16)  # queued jobs of the small rounds: 8-16 is where the proofs stop


def _solve(instance: Instance, solver: str, limit_s: float) -> tuple[Decision, float]:
    started = time.perf_counter()
    decision = solve(instance, solver, time_limit_s=limit_s)
    wall = time.perf_counter() - started
    problems = check(instance, decision)
    if problems:
        raise SystemExit(f"{instance.name}: {solver} broke the rules: {problems[:3]}")
    return decision, wall


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values``: the nearest-rank value."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def small(seeds: int, limit_s: float) -> list[str]:
    rows = [
        "| queued | GPUs | rounds | proven optimal | wall p50 s | wall p95 s | max s |",
        "|---|---|---|---|---|---|---|",
    ]
    one_job: list[float] = []
    for queued in QUEUED:
        for gpus in (64, 128, 256):
            walls, proven = [], 0
            for family in FAMILIES:
                for seed in range(SEED, SEED + seeds):
                    instance = generate(family, gpus=gpus, queued=queued, seed=seed)
                    decision, wall = _solve(instance, "cpsat", limit_s)
                    walls.append(wall)
                    proven += decision.status is Status.OPTIMAL
                    if queued == 1:
                        one_job.append(decision.wall_s)
            rows.append(
                f"| {queued} | {gpus} | {len(walls)} | {proven / len(walls):.0%} | "
                f"{statistics.median(walls):.3f} | {_quantile(walls, 0.95):.3f} | "
                f"{max(walls):.3f} |"
            )
    rows.append("")
    rows.append(
        f"1-job rounds: solve time (the decision's `wall_s`) p50 "
        f"{statistics.median(one_job) * 1000:.1f} ms, "
        f"p95 {_quantile(one_job, 0.95) * 1000:.1f} ms, "
        f"max {max(one_job) * 1000:.1f} ms over {len(one_job)} rounds."
    )
    return rows


def medium(seeds: int, limit_s: float) -> list[str]:
    walls, proven, gaps = [], 0, []
    for k in range(seeds):
        family = FAMILIES[k % len(FAMILIES)]
        instance = generate(family, gpus=128, queued=64, seed=SEED + k)
        decision, wall = _solve(instance, "cpsat", limit_s)
        walls.append(wall)
        proven += decision.status is Status.OPTIMAL
        gaps.append(decision.gap)
    return [
        f"128 GPUs / 64 queued, {seeds} rounds over the four families, {limit_s:g} s: "
        f"proven optimal {proven}/{seeds}; wall p50 {statistics.median(walls):.2f} s, "
        f"p95 {_quantile(walls, 0.95):.2f} s; gap to the reported bound median "
        f"{statistics.median(gaps):.1%}.",
    ]


def large(seeds: int, limits: list[float], families: list[str]) -> list[str]:
    """~1,000 GPUs / 500 queued: cpsat's gap to its reported bound, and its objective
    against the greedy's (the issue's two targets at this size), at each limit."""
    head = " | ".join(f"cpsat {s:g} s against wspt | bound | gap" for s in limits)
    rows = [
        f"| family | seed | running | {head} |",
        "|---|---|---|" + "---|---|---|" * len(limits),
    ]
    gaps: dict[float, list[float]] = {s: [] for s in limits}
    for family in families:
        for seed in range(SEED, SEED + seeds):
            instance = generate(family, gpus=1024, queued=500, seed=seed)
            greedy, _ = _solve(instance, "wspt", limits[0])
            cells = []
            for limit_s in limits:
                decision, _ = _solve(instance, "cpsat", limit_s)
                gaps[limit_s].append(decision.gap)
                cells.append(
                    f"{decision.objective / greedy.objective - 1:+.2%} | "
                    f"{decision.bound / greedy.objective - 1:+.2%} | {decision.gap:.1%}"
                )
            rows.append(f"| {family} | {seed} | {len(instance.running)} | {' | '.join(cells)} |")
    medians = ", ".join(f"{statistics.median(found):.1%} at {s:g} s" for s, found in gaps.items())
    target = " (target: at most 3% at 5 s)" if 5.0 in limits else ""
    return [
        *rows,
        "",
        f"Median gap {medians}, over {len(gaps[limits[0]])} rounds{target}.",
        "The bound against wspt is the reported bound's distance below wspt's objective.",
    ]


def replay_rounds(jobs: int) -> list[Instance]:
    """The rounds of two queued jobs or more of the synthetic replay's first ``jobs``
    jobs (``bench/sim_bench.py``'s cluster and trace), as wspt decided them."""
    cluster = synthetic_cluster(1024, seed=0)
    trace = synthetic_trace(jobs, cluster, load=0.8, seed=0)
    recorder = KeepRounds(WsptPolicy(), least=2)
    config = SimConfig(
        round_period_s=None,
        round_batch_s=600,
        duration_noise_sigma=0.3,
        mtbf_node_s=60 * 86_400,
        repair_s=4 * 3600,
    )
    simulate(trace, cluster, config, policy=recorder)
    return recorder.rounds


def replay(
    rounds: list[Instance], jobs: int, sample: int, budget_s: float, limit_s: float
) -> list[str]:
    step = max(1, len(rounds) // sample)
    chosen = rounds[::step][:sample]
    analytic, lagrangian, final, times, queued, gains = [], [], [], [], [], []
    proven = 0
    for instance in chosen:
        greedy, _ = _solve(instance, "wspt", limit_s)
        value = greedy.objective
        bound = lower_bound(instance)
        tic = time.perf_counter()
        stronger = max(bound, lagrangian_bound(instance, value, tic + budget_s))
        times.append(time.perf_counter() - tic)
        if stronger > value * (1 + 1e-9) + 1e-6:
            raise SystemExit(f"{instance.name}: bound {stronger} above a decision of {value}")
        decision, _ = _solve(instance, "cpsat", limit_s)
        gains.append(1 - decision.objective / value)
        proven += decision.status is Status.OPTIMAL
        analytic.append((value - bound) / value)
        lagrangian.append((value - stronger) / value)
        final.append(decision.gap)
        queued.append(len(instance.queue))
    return [
        f"{len(chosen)} rounds of {len(rounds)} with two queued jobs or more, "
        f"evenly spaced, from the first {jobs} jobs of `bench/sim_bench.py`'s trace on its "
        f"1,008-GPU cluster, decided by wspt (queued p50 {statistics.median(queued):.0f}, "
        f"max {max(queued)}):",
        "",
        "| gap of | median | p90 |",
        "|---|---|---|",
        f"| the greedy to the analytic bound | {statistics.median(analytic):.2%} | "
        f"{_quantile(analytic, 0.9):.2%} |",
        f"| the greedy to the Lagrangian bound (or the analytic, if higher) | "
        f"{statistics.median(lagrangian):.2%} | {_quantile(lagrangian, 0.9):.2%} |",
        f"| cpsat at {limit_s:g} s to its reported bound | {statistics.median(final):.2%} | "
        f"{_quantile(final, 0.9):.2%} |",
        "",
        f"The Lagrangian bound's time (given {budget_s:g} s; it stops once converged): "
        f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s.",
        "",
        f"cpsat at {limit_s:g} s against the greedy on these rounds: mean gain "
        f"{statistics.mean(gains):.2%}, median {statistics.median(gains):.2%}; "
        f"{sum(g > 1e-9 for g in gains)} of {len(gains)} improved, {proven} proven optimal.",
    ]


def _whole_model(instance: Instance, alike: bool, limit_s: float) -> tuple[int, float, bool]:
    """The whole round's model from wspt's decision (offering alike idle nodes as
    prefixes, or every node): its choices, CP-SAT's time and whether it proved it."""
    with patch.object(
        neighbourhood,
        "_interchangeable",
        neighbourhood._interchangeable if alike else lambda *_: Interchangeable([], []),
    ):
        hood, _, _ = whole_neighbourhood(instance, wspt_greedy(instance))
    preset = load_preset(None)
    tic = time.perf_counter()
    result = solve_neighbourhood(hood, preset.parameters, tic + limit_s, preset, 0, whole=True)
    proved = result is not None and result.proved
    return sum(len(item.nodes) for item in hood.jobs), time.perf_counter() - tic, proved


def symmetry(rounds: list[Instance], sample: int, limit_s: float) -> list[str]:
    """The whole round's model of replay rounds of at most 20 queued jobs, with alike
    idle nodes offered as prefixes and with every node offered."""
    small = [r for r in rounds if len(r.queue) <= 20]
    step = max(1, len(small) // sample)
    rows = [
        "| round | queued | idle nodes | choices, every node | as prefixes "
        "| proof s, every node | as prefixes |",
        "|---|---|---|---|---|---|---|",
    ]
    for instance in small[::step][:sample]:
        used = {instance.parse_gpu(g).node for job in instance.running for g in job.gpu_ids}
        cells = []
        for alike in (False, True):
            pairs, seconds, proved = _whole_model(instance, alike, limit_s)
            cells.append((pairs, f"{seconds:.2f}" if proved else f"> {limit_s:g}"))
        rows.append(
            f"| {instance.name} | {len(instance.queue)} | {len(instance.nodes) - len(used)} | "
            f"{cells[0][0]} | {cells[1][0]} | {cells[0][1]} | {cells[1][1]} |"
        )
    return rows


TABLE = (
    ("hetero", 128, 120),
    ("hetero", 320, 300),
    ("hetero", 1024, 500),
)


def table(limits: tuple[float, float]) -> list[str]:
    rows = [
        f"| instance | GPUs / queued / running | greedy | cpsat {limits[0]:g} s | "
        f"cpsat {limits[1]:g} s | bound | gap at {limits[0]:g} s | gap at {limits[1]:g} s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for family, gpus, queued in TABLE:
        instance = generate(family, gpus=gpus, queued=queued, seed=SEED)
        size = sum(node.gpu_count for node in instance.nodes)
        greedy, _ = _solve(instance, "wspt", limits[0])
        short, _ = _solve(instance, "cpsat", limits[0])
        long, _ = _solve(instance, "cpsat", limits[1])
        base = greedy.objective
        rows.append(
            f"| {family}-{gpus} | {size} / {len(instance.queue)} / {len(instance.running)} | "
            f"{base:.4g} | {short.objective / base - 1:+.2%} | {long.objective / base - 1:+.2%} | "
            f"{long.bound:.4g} | {short.gap:.1%} | {long.gap:.1%} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, default=5, help="seeds per family and size (small; 0: skip)"
    )
    parser.add_argument("--medium-seeds", type=int, default=20, help="0: skip the section")
    parser.add_argument("--limit", type=float, default=5.0)
    parser.add_argument("--long-limit", type=float, default=30.0)
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--large-seeds", type=int, default=2, help="0: skip the section")
    parser.add_argument(
        "--large-limits", default="", help="comma-separated limits, s (default: --limit)"
    )
    parser.add_argument("--large-families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument("--replay-jobs", type=int, default=2000)
    parser.add_argument("--replay-rounds", type=int, default=40, help="0: skip the section")
    parser.add_argument("--symmetry-rounds", type=int, default=10, help="0: skip the section")
    parser.add_argument("--symmetry-limit", type=float, default=10.0, help="CP-SAT seconds")
    parser.add_argument("--out", type=Path, default=HERE / "EXACT.md")
    args = parser.parse_args()
    started = time.perf_counter()
    lines = [
        "# Exact rounds and the bound",
        "",
        f"`python bench/exact.py` (seeds from {SEED}, never tuned on); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"OR-Tools {ortools.__version__}. One run; every decision checked.",
        "",
    ]
    if args.seeds:
        lines += [f"## Small rounds (cpsat, {args.limit:g} s limit)", ""]
        lines += [*small(args.seeds, args.limit), ""]
    if args.medium_seeds:
        lines += ["## 128 GPUs / 64 queued", "", *medium(args.medium_seeds, args.limit), ""]
    if not args.skip_table:
        lines += ["## Greedy, cpsat and the bound", "", *table((args.limit, args.long_limit)), ""]
    if args.large_seeds:
        # Each limit once, in the order given; the families named, each once.
        limits = list(dict.fromkeys(float(s) for s in args.large_limits.split(",") if s))
        families = list(dict.fromkeys(f for f in args.large_families.split(",") if f))
        unknown = set(families) - set(FAMILIES)
        if unknown or not families:
            parser.error(f"--large-families: choose from {', '.join(FAMILIES)}")
        named = "every family" if set(families) == set(FAMILIES) else ", ".join(families)
        lines += [
            f"## 1,024 GPUs / 500 queued, {named}",
            "",
            *large(args.large_seeds, limits or [args.limit], families),
            "",
        ]
    if args.replay_rounds or args.symmetry_rounds:
        rounds = replay_rounds(args.replay_jobs)
    if args.replay_rounds:
        section = replay(rounds, args.replay_jobs, args.replay_rounds, 0.5, 2.0)
        lines += ["## The bound on replay rounds", "", *section, ""]
    if args.symmetry_rounds:
        lines += [
            "## Alike idle nodes as prefixes, on replay rounds",
            "",
            "CP-SAT alone on the whole round's model (the default preset,"
            f" {args.symmetry_limit:g} s), from wspt's decision:",
            "",
            *symmetry(rounds, args.symmetry_rounds, args.symmetry_limit),
            "",
        ]
    lines.append(f"Total {time.perf_counter() - started:.0f} s.")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
