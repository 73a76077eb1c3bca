"""Fairness benchmark: several tenants, priority classes, preemption and failures.

Run alone on an idle machine::

    .venv/bin/python bench/fairness.py              # writes bench/FAIRNESS.md
    .venv/bin/python bench/fairness.py --quick --out /tmp/fair

A generated cluster whose tenants split 80% of its GPUs as guarantees
(``whale_opt.sim.synthetic.tenant_cluster``), a bursty multi-tenant trace of
online, training and best-effort jobs (``tenant_trace``), seeded node
failures, aging, and every policy with preemption allowed (and ``wspt``
without, for reference). Every round's decision goes through the checker.
Per policy: jobs lost (must be 0), the longest wait per priority class (the
starvation figure), preemptions and GPU-hours lost to preemptions and to
failures, and per-tenant fairness (Jain's index over mean slowdowns, share
of guarantee held, guarantee shortfall).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import ortools

from whale_opt.sim import SimConfig, simulate, tenant_cluster, tenant_trace
from whale_opt.sim.metrics import SimResult

HERE = Path(__file__).resolve().parent
POLICIES = ("fifo", "sjf", "wspt", "best-fit", "frag-aware", "las", "hybrid", "cpsat")
CLASSES = ("online", "training", "best-effort")


def run(args: argparse.Namespace) -> tuple[list[SimResult], list[str]]:
    cluster = tenant_cluster(args.gpus, seed=args.seed)
    policy = replace(cluster.policy, aging_per_hour=args.aging, min_run_s=args.min_run)
    cluster = cluster.replace(policy=policy)
    trace = tenant_trace(
        args.jobs, cluster, load=args.load, seed=args.seed, burst_s=args.burst_h * 3600
    )
    runs: list[tuple[str, object]] = [(p, cluster) for p in args.policies]
    runs.append(("wspt", cluster.replace(policy=replace(policy, allow_preemption=False))))
    results, labels = [], []
    for name, inst in runs:
        config = SimConfig(
            policy=name,
            time_limit_s=args.cpsat_limit,
            round_period_s=None,
            round_batch_s=args.batch,
            seed=args.seed,
            mtbf_node_s=args.mtbf_h * 3600,
            repair_s=3600,
            checkpoint_interval_s=1800,
            check_decisions=True,
        )
        tic = time.perf_counter()
        result = simulate(trace, inst, config)  # type: ignore[arg-type]
        label = name if inst is cluster else f"{name} (no preemption)"
        print(f"{label:>22}: {time.perf_counter() - tic:6.1f} s wall", flush=True)
        results.append(result)
        labels.append(label)
    return results, labels


def table(results: list[SimResult], labels: list[str], tenants: list[str]) -> list[str]:
    head = (
        "| policy | lost jobs | completed | weighted JCT s | "
        + " | ".join(f"longest wait {c} h" for c in CLASSES)
        + " | preemptions | GPU-h lost to preemption | GPU-h lost to failures | "
        "Jain (tenant slowdown) | "
        + " | ".join(f"{t} share of guarantee" for t in tenants)
        + " | guarantee shortfall GPU-h |"
    )
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for result, label in zip(results, labels, strict=True):
        s = result.summary

        def get(key: str, s: dict = s) -> float:  # type: ignore[type-arg]
            return float(s.get(key, float("nan")))

        waits = " | ".join(f"{get(f'max_queue_delay_s[class:{c}]') / 3600:.1f}" for c in CLASSES)
        shares = " | ".join(f"{get(f'share_vs_guarantee[tenant:{t}]'):.2f}" for t in tenants)
        rows.append(
            f"| {label} | {s['lost_jobs']} | {s['completed']}/{s['submitted']} | "
            f"{s['weighted_jct_s']:.0f} | {waits} | {s['preemptions']} | "
            f"{get('lost_gpu_hours_preemption'):.1f} | {get('lost_gpu_hours_failure'):.1f} | "
            f"{s['jain_tenants']:.3f} | {shares} | {get('guarantee_shortfall_gpu_h'):.1f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run, seconds")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--jobs", type=int, default=800)
    parser.add_argument("--load", type=float, default=1.1)
    parser.add_argument("--burst-h", type=float, default=6.0)
    parser.add_argument("--aging", type=float, default=0.5, help="policy.aging_per_hour")
    parser.add_argument("--min-run", type=int, default=1800, help="policy.min_run_s")
    parser.add_argument("--mtbf-h", type=float, default=240.0, help="node MTBF, hours")
    parser.add_argument("--batch", type=int, default=300, help="event-round batch seconds")
    parser.add_argument("--cpsat-limit", type=float, default=2.0)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.gpus, args.jobs, args.cpsat_limit, args.mtbf_h = 32, 30, 0.2, 48.0
    args.policies = tuple(args.policies.split(","))
    started = time.perf_counter()
    results, labels = run(args)
    tenants = sorted(tenant_cluster(args.gpus, seed=args.seed).tenants)
    lines = [
        "# Fairness, preemption and failures",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}; "
        f"Python {platform.python_version()}, OR-Tools {ortools.__version__}",
        f"- command: `{' '.join(['python bench/fairness.py', *sys.argv[1:]])}`",
        f"- cluster: `tenant_cluster({args.gpus}, seed={args.seed})`: tenants "
        f"{', '.join(tenants)} split 80% of the GPUs as guarantees; aging {args.aging}/h, "
        f"min_run_s {args.min_run}, checkpoints every 1800 s of run time",
        f"- trace: `tenant_trace({args.jobs}, load={args.load}, burst_s={args.burst_h} h, "
        f"seed={args.seed})`; node failures MTBF {args.mtbf_h} h, repair 1 h; event rounds "
        f"batched {args.batch} s; cpsat {args.cpsat_limit} s a round; every decision checked",
        "",
        *table(results, labels, tenants),
        "",
        "'longest wait' counts a job still waiting at the end with its wait so far; "
        "'share of guarantee' is the tenant's mean GPUs held over its guarantee.",
        "",
        f"Took {time.perf_counter() - started:.0f} s.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "FAIRNESS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
