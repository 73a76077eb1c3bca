"""Simulator benchmark: a 10,000-job synthetic trace on ~1,000 GPUs.

Run alone on an idle machine::

    .venv/bin/python bench/sim_bench.py                  # wspt
    .venv/bin/python bench/sim_bench.py --cpsat 2        # and cpsat, 2 s a round
    .venv/bin/python bench/sim_bench.py --jobs 1000      # a quick look
    .venv/bin/python bench/sim_bench.py --cpsat 2 --preset quick  # cpsat's quick preset

Prints the wall time of each replay, the side-by-side summary, and each
policy's weighted JCT over the replay's floor (:mod:`whale_opt.sim.floor`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from whale_opt.sim import SimConfig, simulate, synthetic_cluster, synthetic_trace
from whale_opt.sim.floor import over_floor, replay_floor
from whale_opt.sim.metrics import summary_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--batch", type=int, default=600, help="event-round batch seconds")
    parser.add_argument("--period", type=int, default=0, help="periodic rounds (0: none)")
    parser.add_argument("--cpsat", type=float, default=None, help="also cpsat, seconds a round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default=None, help="cpsat's preset (default: default)")
    args = parser.parse_args()

    cluster = synthetic_cluster(args.gpus, seed=args.seed)
    trace = synthetic_trace(args.jobs, cluster, load=args.load, seed=args.seed)
    gpus = sum(node.gpu_count for node in cluster.nodes)
    print(f"{len(trace)} jobs over {trace[-1].submit_s / 86400:.1f} days on {gpus} GPUs")
    base = SimConfig(
        round_period_s=args.period or None,
        round_batch_s=args.batch,
        seed=args.seed,
        duration_noise_sigma=0.3,
        mtbf_node_s=60 * 86_400,
        repair_s=4 * 3600,
    )
    runs = [base]
    if args.cpsat is not None:
        runs.append(replace(base, policy="cpsat", time_limit_s=args.cpsat, preset=args.preset))
    results = []
    for config in runs:
        tic = time.perf_counter()
        result = simulate(trace, cluster, config)
        wall = time.perf_counter() - tic
        print(f"{config.policy}: {wall:.1f} s wall, {len(result.rounds)} rounds", flush=True)
        results.append(result)
    print(summary_table(results))
    floor = replay_floor(trace, cluster, base)
    print(f"the replay's floor (no schedule does better): {floor:,.0f} s weighted JCT")
    for config, result in zip(runs, results, strict=True):
        ratio = over_floor(result.summary, floor)
        print(f"  {config.policy}: {'(not all completed)' if ratio is None else f'x{ratio:.3f}'}")


if __name__ == "__main__":
    main()
