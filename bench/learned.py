"""The learned policy against the baselines and CP-SAT on held-out synthetic traces.

Train first (one model per cluster, on trace seeds 1-5)::

    .venv/bin/whale-opt train --cluster a100-4x8 --out results/learned/a100-4x8
    .venv/bin/whale-opt train --cluster hetero-64 --out results/learned/hetero-64

then::

    .venv/bin/python bench/learned.py            # both clusters, seeds 100-104

For each cluster, every policy replays the same synthetic traces (seeds
100-104, which training never sees; same simulator seed per trace) and the
script prints, per policy, the mean over the seeds of weighted JCT, average
JCT, p95 queue wait and GPU utilisation, the learned policy's gain over each,
and its fallback rounds; then the training's steps, wall time and steps/s
(``train.json``). It keeps ``bench/out/learned/runs.csv`` (one row per run;
a baseline's rows are reused on the next call unless ``--fresh``, the learned
policy's are always rerun) and writes the learning curves
``bench/plots/learned-<cluster>.png`` (training episodes' weighted JCT, with
wspt, sjf and fifo on the training traces as lines). Needs the ``rl`` extra.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from whale_opt.gym.train import load_cluster, plot_curve
from whale_opt.policies.learned import LearnedPolicy
from whale_opt.sim import SimConfig, simulate, synthetic_trace

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("learned", "fifo", "sjf", "best-fit", "hybrid", "wspt", "cpsat")
HOUR = 3600.0


def run_one(policy: str, cluster_name: str, seed: int, args: argparse.Namespace) -> dict:
    """One replay of trace ``seed`` under ``policy``: the figures the table reports."""
    cluster = load_cluster(cluster_name)
    trace = synthetic_trace(args.jobs, cluster, load=args.load, seed=seed)
    learned = None
    if policy == "learned":
        learned = LearnedPolicy(args.models / cluster_name / "model.zip")
    config = SimConfig(policy=policy if learned is None else "wspt", seed=seed)
    if policy == "cpsat":
        config = SimConfig(policy="cpsat", seed=seed, time_limit_s=args.cpsat_time_limit)
    began = time.perf_counter()
    result = simulate(trace, cluster, config, policy=learned)
    summary = result.summary
    fallbacks = int((result.rounds["status"] == "greedy-fallback").sum()) if learned else 0
    return {
        "cluster": cluster_name,
        "policy": policy,
        "seed": seed,
        "weighted_jct_h": summary["weighted_jct_s"] / HOUR,
        "avg_jct_h": summary["avg_jct_s"] / HOUR,
        "p95_wait_h": summary["queue_delay_s_p95"] / HOUR,
        "utilisation": summary["gpu_utilisation"],
        "completed": summary["completed"],
        "rounds": summary["rounds"],
        "fallback_rounds": fallbacks,
        "wall_s": time.perf_counter() - began,
    }


def table(runs: pd.DataFrame, cluster: str) -> str:
    """The markdown table of one cluster: means over the seeds."""
    mine = runs[runs["cluster"] == cluster]
    means = mine.groupby("policy", sort=False).mean(numeric_only=True)
    learned = means.loc["learned", "weighted_jct_h"] if "learned" in means.index else None
    lines = [
        "| policy | weighted JCT (h) | learned vs it | avg JCT (h) | p95 wait (h) "
        "| utilisation | wall s/run |",
        "|---|---|---|---|---|---|---|",
    ]
    for policy, row in means.iterrows():
        gain = "" if learned is None else f"{(1 - learned / row['weighted_jct_h']) * 100:+.1f}%"
        lines.append(
            f"| {policy} | {row['weighted_jct_h']:.2f} | {gain} | {row['avg_jct_h']:.2f} "
            f"| {row['p95_wait_h']:.2f} | {row['utilisation']:.3f} | {row['wall_s']:.1f} |"
        )
    return "\n".join(lines)


def training_baselines(cluster_name: str, args: argparse.Namespace) -> dict[str, float]:
    """wspt, sjf and fifo on the training traces (seeds 1-5): the curve's reference lines."""
    cluster = load_cluster(cluster_name)
    out = {}
    for policy in ("wspt", "sjf", "fifo"):
        values = [
            simulate(
                synthetic_trace(args.jobs, cluster, load=args.load, seed=seed),
                cluster,
                SimConfig(policy=policy, seed=seed),
            ).summary["weighted_jct_s"]
            / HOUR
            for seed in range(1, 6)
        ]
        out[f"{policy} (training traces)"] = sum(values) / len(values)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", nargs="+", default=["a100-4x8", "hetero-64"])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    parser.add_argument("--jobs", type=int, default=128, help="jobs per trace (as trained)")
    parser.add_argument("--load", type=float, default=1.2, help="offered load (as trained)")
    parser.add_argument("--cpsat-time-limit", type=float, default=0.2, help="s per round")
    parser.add_argument("--models", type=Path, default=ROOT / "results" / "learned")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "learned")
    parser.add_argument("--fresh", action="store_true", help="rerun the baselines too")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print("$", shlex.join([".venv/bin/python", *sys.argv]))
    cache = args.out / "runs.csv"
    kept = pd.read_csv(cache) if cache.is_file() and not args.fresh else pd.DataFrame()
    done = (
        {tuple(key) for key in kept[["cluster", "policy", "seed"]].to_numpy()}
        if len(kept)
        else set()
    )
    rows = [] if kept.empty else kept.to_dict("records")
    for cluster in args.clusters:
        for policy in args.policies:
            for seed in args.seeds:
                if policy != "learned" and (cluster, policy, seed) in done:
                    continue  # a baseline's run does not change; the model may have
                rows = [
                    r
                    for r in rows
                    if (r["cluster"], r["policy"], r["seed"]) != (cluster, policy, seed)
                ]
                rows.append(run_one(policy, cluster, seed, args))
                print(json.dumps(rows[-1]), flush=True)
                pd.DataFrame(rows).to_csv(cache, index=False)
    runs = pd.DataFrame(rows)
    runs = runs[runs["cluster"].isin(args.clusters) & runs["policy"].isin(args.policies)]
    order = {name: k for k, name in enumerate(args.policies)}
    runs = runs.sort_values(
        ["cluster", "policy", "seed"], key=lambda c: c.map(order) if c.name == "policy" else c
    )
    for cluster in args.clusters:
        print(f"\n## {cluster}: {args.jobs} jobs at load {args.load}, seeds {args.seeds}\n")
        print(table(runs, cluster))
        trained = args.models / cluster
        if (trained / "train.json").is_file():
            info = json.loads((trained / "train.json").read_text())
            print(
                f"\ntraining: {info['timesteps']} steps in {info['wall_s'] / 60:.1f} min"
                f" ({info['steps_per_s']:.0f} steps/s)"
            )
            curve = pd.read_csv(trained / "curve.csv")
            png = ROOT / "bench" / "plots" / f"learned-{cluster}.png"
            plot_curve(curve, png, baselines=training_baselines(cluster, args))
            print(f"curve: {png.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
