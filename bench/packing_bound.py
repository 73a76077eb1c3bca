"""A floor under unallocated GPU % at arrived = 100%, for any policy, from the shares alone.

Run ``python bench/packing_bound.py [TRACE ...]`` (default: the 15 traces
with published numbers); it prints a markdown table, mean and sd over the
study's seeds 42..51, with the same shuffle and resizing as ``whale-opt pack``.

Why it is a floor. When the arrived GPU request reaches 100% of capacity,
unallocated % is the request of the pods dropped so far, and it is also at
least the free milli left on the GPUs (capacity = allocated + free). A share
of d > 500 milli owns its GPU (two do not fit), and the 1000 - d milli it
leaves can only take shares of at most 1000 - d. So for any placement of the
pods arrived so far, placed or dropped, one at a time or all at once::

    unallocated >= sum over arrived shares of size d (> 500) of (1000 - d)
                   - sum of the milli of all arrived shares small enough to fill such a hole

(a dropped share of size d counts d >= 1000 - d instead of its hole, so the
bound holds either way). It is taken per share size d and for all sizes > 500
together, and the largest is kept. It ignores CPU, memory, GPU models and
multi-GPU pods, so the true optimum lies above it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whale_opt.pack import arrange, read_cluster, read_pods  # noqa: E402
from whale_opt.pack.published import PUBLISHED, PUBLISHED_TRACES  # noqa: E402
from whale_opt.pack.trace import MILLI, NODE_FILE, pod_file  # noqa: E402

TRACES = ROOT.parent / "shared" / "data" / "traces" / "alibaba-gpu-v2023"
SEEDS = range(42, 52)
LOAD = 1.3


def floor_pct(milli: np.ndarray, num_gpu: np.ndarray, capacity: int) -> float:
    """The bound of the module docstring for the pods ``milli``/``num_gpu`` arrived so far."""
    share = (num_gpu == 1) & (milli < MILLI)
    big = share & (milli > MILLI // 2)
    if not big.any():
        return 0.0
    holes = MILLI - milli[big]
    best = int(holes.sum()) - int(milli[share & ~big & (milli <= holes.max())].sum())
    for d in np.unique(milli[big]):
        hole = MILLI - int(d)
        fill = int(milli[share & (milli <= hole)].sum())
        best = max(best, int((milli[big] == d).sum()) * hole - fill)
    return 100.0 * max(best, 0) / capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=list(PUBLISHED_TRACES))
    args = parser.parse_args()
    cluster = read_cluster(TRACES / NODE_FILE)
    capacity = cluster.gpu_capacity_milli
    print("| trace | floor (mean ± sd) | published FGD |")
    print("|---|---|---|")
    for trace in args.traces:
        pods = read_pods(TRACES / pod_file(trace))
        values = []
        for seed in SEEDS:
            order = arrange(pods, capacity, LOAD, np.random.default_rng(seed))
            arrived = order[np.cumsum(pods.gpu_request_milli[order]) <= capacity]
            values.append(floor_pct(pods.milli[arrived], pods.num_gpu[arrived], capacity))
        fgd = PUBLISHED.get(trace, {}).get("FGD")
        published = f"{fgd[0]:.2f}" if fgd else "-"
        print(f"| {trace} | {np.mean(values):.2f} ± {np.std(values, ddof=1):.2f} | {published} |")


if __name__ == "__main__":
    main()
