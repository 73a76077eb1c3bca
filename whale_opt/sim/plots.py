"""PNG plots comparing runs: queue length and utilisation over time, JCT CDF.

Matplotlib runs on its Agg backend (files only, no display), selected here
before pyplot is imported, so plotting works on headless machines and CI.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: files only, no display

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from whale_opt.sim.metrics import SimResult

HOUR = 3600.0


def save(figure: Figure, path: Path) -> Path:
    """Legends where there are labels, a tight layout, the PNG at ``path``; the figure closed."""
    for axes in figure.axes:
        if axes.get_legend_handles_labels()[0]:
            axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _over_time(results: list[SimResult], column: str, ylabel: str, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(8, 4))
    for result in results:
        rounds = result.rounds
        if rounds.empty:
            continue
        if column == "utilisation":
            values = rounds["busy_gpus"] / rounds["healthy_gpus"].clip(lower=1)
        else:
            values = rounds[column]
        axes.step(rounds["time_s"] / HOUR, values, where="post", label=result.policy, lw=1)
    axes.set_xlabel("simulated time (h)")
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    return save(figure, path)


def _jct_cdf(results: list[SimResult], path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(8, 4))
    for result in results:
        jct = np.sort(result.jobs["jct_s"].dropna().to_numpy()) / HOUR
        if jct.size:
            axes.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=result.policy)
    axes.set_xscale("log")
    axes.set_xlabel("job completion time (h, log scale)")
    axes.set_ylabel("fraction of completed jobs")
    axes.grid(alpha=0.3, which="both")
    return save(figure, path)


def plot_all(results: list[SimResult], directory: str | Path) -> list[Path]:
    """Write ``queue.png``, ``utilisation.png`` and ``jct_cdf.png`` into ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return [
        _over_time(results, "queued", "queued jobs", out / "queue.png"),
        _over_time(results, "utilisation", "busy / healthy GPUs", out / "utilisation.png"),
        _jct_cdf(results, out / "jct_cdf.png"),
    ]
