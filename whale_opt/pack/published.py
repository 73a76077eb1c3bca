"""The published numbers of the FGD study (Weng et al., USENIX ATC '23).

Unallocated GPU % when the arrived GPU request reaches 100% of the
cluster's capacity, mean and standard deviation over 10 seeds, from the
merged results the authors published with their simulator
(hkust-adsl/kubernetes-scheduler-simulator,
``experiments/analysis/expected_results/``), as restated in
``shared/data/traces/alibaba-gpu-v2023/FGD_STUDY.md``. No numbers were
published for gpushare20, gpuspec05, cpu037, cpu072, cpu235 and cpu300.
"""

from __future__ import annotations

POLICY_ORDER = ("Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD")

_TABLE = """
default      13.70 0.33  9.38 0.19  8.35 0.61  8.22 0.53  7.14 0.14  4.77 0.11
gpushare40   15.14 0.34 10.70 0.14 10.24 0.62 10.23 0.53  8.56 0.20  6.04 0.07
gpushare60   17.19 0.35 13.18 0.28 13.10 0.41 12.85 0.37 10.94 0.18  8.75 0.13
gpushare80   19.38 0.28 15.86 0.19 15.50 0.54 15.35 0.50 13.34 0.24 10.92 0.11
gpushare100  21.10 0.15 18.02 0.30 17.78 0.51 17.87 0.50 15.38 0.22 13.36 0.16
multigpu20   13.08 0.52  8.15 0.32  6.66 0.60  6.50 0.64  6.27 0.25  4.47 0.16
multigpu30   13.37 0.47  6.89 0.31  5.45 0.32  5.30 0.32  5.43 0.24  3.64 0.10
multigpu40   14.62 0.76  5.96 0.22  4.65 0.30  4.41 0.31  4.90 0.23  3.09 0.10
gpuspec10    13.74 0.25  9.83 0.39  8.04 0.71  7.76 0.65  6.90 0.21  5.34 0.19
gpuspec20    14.10 0.35 11.71 0.17 10.89 0.21 10.72 0.25 11.54 0.12  5.34 0.13
gpuspec25    14.58 0.34 14.56 0.16 13.59 0.29 13.23 0.35 14.33 0.20  6.09 0.11
cpu050       10.98 0.26  6.97 0.19  6.48 0.34  6.54 0.32  6.44 0.13  5.00 0.11
cpu100       12.57 0.28  8.27 0.27  7.58 0.40  7.50 0.42  6.74 0.13  4.79 0.14
cpu200       16.97 0.27 12.55 0.61 10.33 0.38 10.02 0.48  7.85 0.21  5.18 0.16
cpu250       20.00 0.33 16.43 0.45 12.25 0.61 11.95 0.68  8.79 0.25  6.80 0.29
"""


def _parse(table: str) -> dict[str, dict[str, tuple[float, float]]]:
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for line in table.strip().splitlines():
        trace, *cells = line.split()
        values = [float(c) for c in cells]
        pairs = zip(values[0::2], values[1::2], strict=True)
        out[trace] = dict(zip(POLICY_ORDER, pairs, strict=True))
    return out


PUBLISHED: dict[str, dict[str, tuple[float, float]]] = _parse(_TABLE)
"""trace -> policy -> (mean, sd) of unallocated GPU % at arrived = 100%."""

PUBLISHED_TRACES: tuple[str, ...] = tuple(PUBLISHED)
