"""Projected wall time of a split round at 20k, 50k and 100k GPUs on 4, 16 and 64 workers.

Run ``python bench/projection.py`` (about 5 minutes here); it writes
``bench/PROJECTION.md``. This machine has 2 cores, so the round is measured
piece by piece, one pool at a time, and the wall time on W workers is
projected from the pieces:

- the leader's serial parts, measured at full size: cutting the cluster into
  pools and assigning the queue (:func:`whale_opt.decompose.pools`), quota
  and preemption shares, the pools' sub-instances, pickling them and
  unpickling the pools' decisions, and the merge (whole-cluster rules, the
  jobs they take out list-scheduled again, the decision assembled);
- each pool's solve, measured alone: every pool with ``wspt``, and a sample
  of pools with ``cpsat`` under the deterministic preset (its search is a
  fixed amount of work, so its time is what the pool needs, not a limit);
  a pool's worker also unpickles its sub-instance and pickles its decision;
- the pools spread over W workers longest first (LPT), so the pool phase
  takes at least ``ceil(P / W)`` waves; its makespan is the projected pool
  phase.

Projected wall = serial leader parts + bytes sent / ``--bandwidth`` + pool
phase. The instances are ``generate("hetero", gpus=G, queued=G // 10,
seed=1)`` with their running jobs; pools hold at most 512 GPUs (the default
``max_gpus``), so a pool's size does not grow with the cluster, and the
cpsat sample taken at the first size stands for every size. The queue is not
spread evenly: each job goes to the pool where it would end first, so pools
of the fastest type get most of it, and the heaviest pool sets the pool
phase once there are as many workers as pools.
The whole-round list schedule that :func:`whale_opt.solve.solve` runs first
when it fits the time limit is measured too and shown apart (it is skipped
when it does not fit, as at these sizes with a 30 s limit).
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import pickle
import platform
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIZES = (20_000, 50_000, 100_000)
WORKERS = (4, 16, 64)


def lpt(times: list[float], workers: int) -> float:
    """Makespan of ``times`` on ``workers`` machines, longest first to the least loaded."""
    loads = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heapreplace(loads, loads[0] + t)
    return max(loads)


def measure(gpus: int, cpsat_sample: int) -> dict[str, Any]:
    """The leader's parts and every pool's solve of one round, timed one by one."""
    from whale_opt.budget import round_cost
    from whale_opt.decompose import (
        merge,
        pools,
        preemption_shares,
        quota_shares,
        running_gpus_by_pool,
        sub_instance,
    )
    from whale_opt.generate import generate
    from whale_opt.options import SolveOptions
    from whale_opt.solve import solve_one_pool, wspt_greedy

    instance = generate("hetero", gpus=gpus, queued=gpus // 10, seed=1)
    options = SolveOptions(time_limit_s=600.0, report_bound=False)
    out: dict[str, Any] = {"gpus": gpus, "nodes": len(instance.nodes)}
    out["queued"], out["running"] = len(instance.queue), len(instance.running)

    tic = time.perf_counter()
    parts = pools(instance)
    out["assign_s"] = time.perf_counter() - tic
    tic = time.perf_counter()
    shares = quota_shares(instance, parts)
    caps = preemption_shares(instance, parts)
    busy = [k for k, pool in enumerate(parts) if pool.jobs]
    inside = running_gpus_by_pool(instance, parts)
    subs = [
        sub_instance(instance, parts[k], {n: s[k] for n, s in shares.items()}, caps[k], inside[k])
        for k in busy
    ]
    for sub in subs:
        round_cost(sub)  # solve_split prices every pool to share the time limit
    out["subs_s"] = time.perf_counter() - tic
    out["pools"] = len(subs)

    sent = [pickle.dumps(sub) for sub in subs]
    tic = time.perf_counter()
    for sub in subs:
        pickle.dumps(sub)
    out["pickle_subs_s"] = time.perf_counter() - tic
    out["bytes"] = sum(map(len, sent))

    pool_s, decisions = [], []
    for blob in sent:
        tic = time.perf_counter()
        sub = pickle.loads(blob)
        decision = solve_one_pool(sub, options, solver="wspt")
        back = pickle.dumps(decision)
        pool_s.append(time.perf_counter() - tic)
        decisions.append(back)
    out["wspt_pool_s"] = pool_s
    out["pool_jobs"] = [len(sub.queue) for sub in subs]
    tic = time.perf_counter()
    found = [pickle.loads(blob) for blob in decisions]
    out["unpickle_decisions_s"] = time.perf_counter() - tic
    out["bytes"] += sum(map(len, decisions))

    tic = time.perf_counter()
    merge(instance, parts, found, "wspt", time.perf_counter(), options)
    out["merge_s"] = time.perf_counter() - tic

    tic = time.perf_counter()
    wspt_greedy(instance)
    out["whole_greedy_s"] = time.perf_counter() - tic

    if cpsat_sample:
        deterministic = options.replace(preset="deterministic", time_limit_s=60.0)
        by_jobs = sorted(range(len(subs)), key=lambda k: len(subs[k].queue))
        picks = {round(i * (len(subs) - 1) / max(1, cpsat_sample - 1)) for i in range(cpsat_sample)}
        sample = [by_jobs[i] for i in sorted(picks)]
        cpsat_s = []
        for k in sample:
            tic = time.perf_counter()
            solve_one_pool(pickle.loads(sent[k]), deterministic, solver="cpsat")
            cpsat_s.append(time.perf_counter() - tic)
        out["cpsat_pool_s"] = cpsat_s
        out["cpsat_sample_jobs"] = [len(subs[k].queue) for k in sample]
    return out


def serial_s(row: dict[str, Any], bandwidth: float) -> float:
    """The leader's serial parts, with the bytes it sends and receives."""
    parts = ("assign_s", "subs_s", "pickle_subs_s", "unpickle_decisions_s", "merge_s")
    return sum(row[p] for p in parts) + row["bytes"] / bandwidth


def report(rows: list[dict[str, Any]], cpsat_s: list[float], bandwidth: float) -> str:
    """PROJECTION.md: what was measured, then the projected tables."""
    lines = [
        "# Projected wall time of a split round",
        "",
        f"Made by `python bench/projection.py` on {platform.node()}: {os.cpu_count()} cores,"
        f" Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end"
        " (the machine was shared with other work, so every figure is a loaded one).",
        "",
        (__doc__ or "").split("\n\n", 1)[1].strip(),
        "",
        "## Measured here (seconds)",
        "",
        "| GPUs | nodes | running | queued | pools | assign | sub-instances | pickling"
        " | merge | MB sent | wspt pool mean / max | whole-round greedy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        pickling = row["pickle_subs_s"] + row["unpickle_decisions_s"]
        pool = row["wspt_pool_s"]
        lines.append(
            f"| {row['gpus']:,} | {row['nodes']:,} | {row['running']:,} | {row['queued']:,}"
            f" | {row['pools']} | {row['assign_s']:.2f} | {row['subs_s']:.2f} | {pickling:.2f}"
            f" | {row['merge_s']:.2f} | {row['bytes'] / 1e6:.1f}"
            f" | {sum(pool) / len(pool):.3f} / {max(pool):.3f} | {row['whole_greedy_s']:.2f} |"
        )
    jobs = rows[0].get("cpsat_sample_jobs", [])
    if cpsat_s:
        lines += [
            "",
            f"cpsat (deterministic preset) on {len(cpsat_s)} pools of the {rows[0]['gpus']:,}-GPU"
            " round: "
            + ", ".join(f"{t:.1f} s ({n} queued)" for n, t in zip(jobs, cpsat_s, strict=True))
            + ".",
            "",
            "Queued jobs per pool (min / median / max): "
            + "; ".join(
                f"{row['gpus']:,} GPUs: {min(row['pool_jobs'])} / "
                f"{sorted(row['pool_jobs'])[len(row['pool_jobs']) // 2]} / {max(row['pool_jobs'])}"
                for row in rows
            )
            + ".",
        ]
    for name in ("wspt", "cpsat"):
        if name == "cpsat" and not cpsat_s:
            continue
        lines += [
            "",
            f"## Projected round wall time, {name} pools (seconds)",
            "",
            "Serial leader parts + pool phase (LPT over the workers;"
            " waves = ceil(pools / workers)).",
            "",
            "| GPUs | pools | serial | " + " | ".join(f"{w} workers" for w in WORKERS) + " |",
            "|---|---|---|" + "---|" * len(WORKERS),
        ]
        for row in rows:
            times = row["wspt_pool_s"] if name == "wspt" else cpsat_times(row, cpsat_s, jobs)
            serial = serial_s(row, bandwidth)
            cells = [
                f"{serial + lpt(times, w):.1f} ({math.ceil(row['pools'] / w)} waves)"
                for w in WORKERS
            ]
            lines.append(
                f"| {row['gpus']:,} | {row['pools']} | {serial:.1f} | {' | '.join(cells)} |"
            )
    return "\n".join(lines) + "\n"


def cpsat_times(row: dict[str, Any], seconds: list[float], jobs: list[int]) -> list[float]:
    """Every pool's cpsat time, read off the sample by its queued jobs: linear
    between the two sampled pools around it, the nearest one's beyond them."""
    points = sorted(zip(jobs, seconds, strict=True))
    out = []
    for n in row["pool_jobs"]:
        below = [p for p in points if p[0] <= n] or points[:1]
        above = [p for p in points if p[0] >= n] or points[-1:]
        (j0, s0), (j1, s1) = below[-1], above[0]
        out.append(s0 if j1 == j0 else s0 + (s1 - s0) * (n - j0) / (j1 - j0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--cpsat-sample", type=int, default=6, help="pools solved with cpsat")
    parser.add_argument("--bandwidth", type=float, default=1.25e9, help="leader's bytes/s (10 GbE)")
    parser.add_argument("--out", type=Path, default=HERE / "PROJECTION.md")
    args = parser.parse_args()
    rows = []
    for k, gpus in enumerate(args.sizes):
        row = measure(gpus, args.cpsat_sample if k == 0 else 0)
        print(f"{gpus} GPUs: {len(row['wspt_pool_s'])} pools measured", flush=True)
        rows.append(row)
    cpsat_s = rows[0].get("cpsat_pool_s", [])
    args.out.write_text(report(rows, cpsat_s, args.bandwidth))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
