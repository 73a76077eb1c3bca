"""What a packing study writes: CSV curves, a markdown table, PNG plots.

- ``curves.csv``: per trace, policy and arrived % (0..130), the mean and
  standard deviation of unallocated GPU % over the seeds.
- ``seeds.csv``: the same curves, one row per seed.
- ``table.md``: unallocated GPU % at arrived = 100%, ours (mean +- sd)
  beside the published mean, and the difference.
- ``packing-<trace>.png``: unallocated % against arrived %, one line per
  policy (mean, with a band of +- one sd) and the published value at 100%
  as a marker, like the paper's figure.

Matplotlib runs on its Agg backend (files only, no display).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: files only, no display

import matplotlib.pyplot as plt
import numpy as np

from whale_opt.pack.experiment import GRID, StudyResult
from whale_opt.pack.published import POLICY_ORDER, PUBLISHED

TOLERANCE = 0.5  # points: the target for BestFit and FGD
TARGETED = ("BestFit", "FGD")


def write_curves(results: Sequence[StudyResult], folder: Path) -> tuple[Path, Path]:
    """``curves.csv`` (mean and sd) and ``seeds.csv`` (per seed) in ``folder``."""
    curves, seeds = folder / "curves.csv", folder / "seeds.csv"
    with curves.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["trace", "policy", "arrived_pct", "unallocated_mean", "unallocated_sd", "seeds"]
        )
        for r in results:
            for g, mean, sd in zip(GRID, r.mean, r.sd, strict=True):
                writer.writerow([r.trace, r.policy, int(g), _num(mean), _num(sd), len(r.seeds)])
    with seeds.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["trace", "policy", "seed", "arrived_pct", "unallocated_pct"])
        for r in results:
            for seed, row in zip(r.seeds, r.curves, strict=True):
                for g, value in zip(GRID, row, strict=True):
                    writer.writerow([r.trace, r.policy, seed, int(g), _num(value)])
    return curves, seeds


def _num(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.4f}"


def _cell(result: StudyResult | None, trace: str, policy: str) -> str:
    if result is None:
        return "-"
    mean, sd = result.at(100)
    published = PUBLISHED.get(trace, {}).get(policy)
    if published is None:
        return f"{mean:.2f} ± {sd:.2f}"
    diff = mean - published[0]
    mark = ""
    if policy in TARGETED:
        mark = " ✓" if abs(diff) <= TOLERANCE else " ✗"
    return f"{mean:.2f} ± {sd:.2f} / {published[0]:.2f} ({diff:+.2f}){mark}"


def markdown_table(results: Sequence[StudyResult]) -> str:
    """Unallocated GPU % at arrived = 100%: ``ours ± sd / published (ours - published)``.

    BestFit and FGD cells carry ✓ when within ±0.5 points of the published mean.
    """
    by_key = {(r.trace, r.policy): r for r in results}
    traces = list(dict.fromkeys(r.trace for r in results))
    policies = [p for p in POLICY_ORDER if any(r.policy == p for r in results)]
    policies += sorted({r.policy for r in results} - set(policies))
    lines = [
        "| trace | " + " | ".join(policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    for trace in traces:
        cells = [_cell(by_key.get((trace, p)), trace, p) for p in policies]
        lines.append(f"| {trace} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_trace(results: Sequence[StudyResult], trace: str, path: Path, start: int = 75) -> Path:
    """Unallocated % against arrived % for ``trace``, one line per policy."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    window = np.asarray(GRID) >= start
    for r in (r for r in results if r.trace == trace):
        line = axes.plot(GRID[window], r.mean[window], label=r.policy)[0]
        axes.fill_between(
            GRID[window],
            (r.mean - r.sd)[window],
            (r.mean + r.sd)[window],
            color=line.get_color(),
            alpha=0.2,
        )
        published = PUBLISHED.get(trace, {}).get(r.policy)
        if published is not None:
            axes.errorbar(
                [100],
                [published[0]],
                yerr=[published[1]],
                fmt="x",
                color=line.get_color(),
                capsize=3,
            )
    axes.axvline(100, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xlabel("arrived workload (% of cluster GPU capacity)")
    axes.set_ylabel("unallocated GPU (%)")
    seeds = max((len(r.seeds) for r in results if r.trace == trace), default=0)
    axes.set_title(f"openb {trace}: mean ± sd over {seeds} seeds (x: published at 100%)")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def write_all(results: Sequence[StudyResult], folder: Path) -> list[Path]:
    """Every file of the module docstring in ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = list(write_curves(results, folder))
    table = folder / "table.md"
    table.write_text(markdown_table(results), "utf-8")
    paths.append(table)
    for trace in dict.fromkeys(r.trace for r in results):
        paths.append(plot_trace(results, trace, folder / f"packing-{trace}.png"))
    return paths


def timing_table(results: Sequence[StudyResult]) -> str:
    """Wall seconds of all seeds of each trace x policy, as a markdown table."""
    traces = list(dict.fromkeys(r.trace for r in results))
    policies = list(dict.fromkeys(r.policy for r in results))
    by_key = {(r.trace, r.policy): r.seconds for r in results}
    lines = ["| trace | " + " | ".join(policies) + " |", "|---|" + "---|" * len(policies)]
    for trace in traces:
        cells = [f"{by_key[(trace, p)]:.1f}" if (trace, p) in by_key else "-" for p in policies]
        lines.append(f"| {trace} | " + " | ".join(cells) + " |")
    total = np.sum(list(by_key.values()))
    return "\n".join(lines) + f"\n\nAll runs: {total:.0f} s.\n"
