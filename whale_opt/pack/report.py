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

from whale_opt.pack.experiment import GRID, POLICIES, StudyResult
from whale_opt.pack.published import POLICY_ORDER, PUBLISHED

TOLERANCE = 0.5  # points: the target for BestFit and FGD
TARGETED = ("BestFit", "FGD")
ZOOM_FROM = 95  # arrived %: where the inset starts
OUR_COLOURS = ["black", "tab:pink", "tab:gray", "tab:olive", "tab:cyan"]


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
    order = list(dict.fromkeys([*POLICY_ORDER, *POLICIES]))
    policies = [p for p in order if any(r.policy == p for r in results)]
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
    """Unallocated % against arrived % for ``trace``, one line per policy.

    With more than one policy, an inset enlarges arrived >= 95% around the
    lowest lines, where the best policies lie within a point of each other.
    """
    mine = [r for r in results if r.trace == trace]
    figure, axes = plt.subplots(figsize=(8.5, 4.5))
    panels = [(axes, np.asarray(GRID) >= start)]
    if len(mine) > 1:
        inset = axes.inset_axes((0.58, 0.56, 0.4, 0.4))
        panels.append((inset, np.asarray(GRID) >= ZOOM_FROM))
        lowest = min(r.at(100)[0] for r in mine)
        inset.set_ylim(lowest - 0.6, lowest + 1.4)
        inset.tick_params(labelsize="x-small")
        inset.grid(alpha=0.3)
    ours = iter(OUR_COLOURS * len(mine))
    for r in mine:
        if r.policy in POLICY_ORDER:  # the paper's: solid, in matplotlib's first colours
            colour, dash = f"C{POLICY_ORDER.index(r.policy)}", "-"
        else:  # ours: dashed, in colours the paper's lines do not use
            colour, dash = next(ours), "--"
        published = PUBLISHED.get(trace, {}).get(r.policy)
        for panel, window in panels:
            label = r.policy if panel is axes else None
            panel.plot(GRID[window], r.mean[window], label=label, color=colour, linestyle=dash)
            low, high = (r.mean - r.sd)[window], (r.mean + r.sd)[window]
            panel.fill_between(GRID[window], low, high, color=colour, alpha=0.2)
            if published is not None:
                panel.errorbar(
                    [100], [published[0]], yerr=[published[1]], fmt="x",
                    color=colour, capsize=3,
                )  # fmt: skip
            panel.axvline(100, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xlabel("arrived workload (% of cluster GPU capacity)")
    axes.set_ylabel("unallocated GPU (%)")
    seeds = max((len(r.seeds) for r in mine), default=0)
    axes.set_title(f"openb {trace}: mean ± sd over {seeds} seeds (x: published at 100%)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
