"""One table and one plot per trace from several ``whale-opt pack`` runs.

Run ``python bench/packing_merge.py -o OUT DIR [DIR ...]``: each DIR is the
``-o`` folder of a ``whale-opt pack`` run. Their ``seeds.csv`` files (one
unallocated % curve per trace, policy and seed) are read back and merged, a
later DIR's (trace, policy) replacing an earlier one's; OUT gets the
``table.md``, ``curves.csv``, ``seeds.csv`` and ``packing-<trace>.png`` that
one run over all of them would have written. Wall times are not in
``seeds.csv``; they are in each run's printed timing table.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whale_opt.pack.experiment import GRID, StudyResult  # noqa: E402
from whale_opt.pack.report import markdown_table, write_all  # noqa: E402


def read_seeds(folder: Path) -> dict[tuple[str, str], dict[int, np.ndarray]]:
    """(trace, policy) -> seed -> the curve on GRID, from ``folder/seeds.csv``."""
    out: dict[tuple[str, str], dict[int, np.ndarray]] = defaultdict(dict)
    with (folder / "seeds.csv").open() as handle:
        for row in csv.DictReader(handle):
            curves = out[row["trace"], row["policy"]]
            seed = int(row["seed"])
            curve = curves.setdefault(seed, np.full(len(GRID), np.nan))
            value = row["unallocated_pct"]
            curve[int(row["arrived_pct"])] = float(value) if value else np.nan
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    merged: dict[tuple[str, str], dict[int, np.ndarray]] = {}
    for folder in args.folders:
        merged.update(read_seeds(folder))
    results = [
        StudyResult(
            trace=trace,
            policy=policy,
            seeds=tuple(sorted(curves)),
            curves=np.array([curves[s] for s in sorted(curves)]),
            seconds=0.0,
        )
        for (trace, policy), curves in merged.items()
    ]
    write_all(results, args.output)
    print(markdown_table(results))


if __name__ == "__main__":
    main()
