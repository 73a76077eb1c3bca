"""Figures per priority class and per tenant, and what tenants were owed.

One row per group (``class:<name>``, ``tenant:<name>``) of a run:

- ``jobs``, ``completed``; ``jct_mean_s``, ``jct_p95_s`` over completed jobs;
- ``max_queue_delay_s``: the longest wait from submission to first start,
  counting a job still waiting at the end with its wait so far (so a
  starving job shows, as a lower bound, instead of vanishing);
- ``gpu_hours``: GPU-hours its jobs held (all attempts, kept or lost);
  ``lost_gpu_hours``: of which kept no work (preemptions, failures);
- ``slowdown_mean``: mean JCT / isolated run time over completed jobs;
- tenants only: ``mean_gpus`` (GPU-hours over the run's span),
  ``guaranteed_gpus``, ``share_vs_guarantee`` (mean GPUs / guarantee) and
  ``guarantee_shortfall_gpu_h``: the time integral, between rounds, of the
  GPUs it was *owed*: the part of its guarantee its waiting jobs asked for
  and it did not hold (the rounds table's ``owed[<tenant>]``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

HOUR = 3600.0
SUMMARY_FIGURES = (
    "jct_mean_s",
    "jct_p95_s",
    "max_queue_delay_s",
    "gpu_hours",
    "lost_gpu_hours",
    "share_vs_guarantee",
    "guarantee_shortfall_gpu_h",
)


def tenant_columns(
    guarantees: Mapping[str, int],
    running: Iterable[tuple[str, int]],
    waiting: Iterable[tuple[str, int]],
) -> dict[str, int]:
    """The rounds table's per-tenant columns: ``held[<t>]``, the GPUs tenant t holds,
    and ``owed[<t>]``, the part of its guarantee its waiting jobs ask for and it
    does not hold (``running``, ``waiting``: (tenant, GPUs) per job)."""
    held: dict[str, int] = defaultdict(int)
    asked: dict[str, int] = defaultdict(int)
    for tenant, gpus in running:
        held[tenant] += gpus
    for tenant, gpus in waiting:
        asked[tenant] += gpus
    out: dict[str, int] = {}
    for name, guaranteed in guarantees.items():
        out[f"held[{name}]"] = held[name]
        out[f"owed[{name}]"] = max(0, min(guaranteed, held[name] + asked[name]) - held[name])
    return out


def integral(rounds: pd.DataFrame, column: str, until: float) -> float:
    """Time integral of a per-round column, each value holding until the next round."""
    if rounds.empty or column not in rounds:
        return 0.0
    times = rounds["time_s"].to_numpy(dtype=float)
    spans = np.diff(np.append(times, max(until, times[-1])))
    return float((rounds[column].fillna(0).to_numpy(dtype=float) * spans).sum())


def _figures(jobs: pd.DataFrame) -> dict[str, Any]:
    done = jobs[jobs["status"] == "completed"]
    jct = done["jct_s"].dropna()
    waited = jobs["waited_s"].dropna()
    return {
        "jobs": len(jobs),
        "completed": len(done),
        "jct_mean_s": float(jct.mean()) if len(jct) else np.nan,
        "jct_p95_s": float(np.percentile(jct, 95)) if len(jct) else np.nan,
        "max_queue_delay_s": float(waited.max()) if len(waited) else np.nan,
        "gpu_hours": float((jobs["run_s"] * jobs["gpus"]).sum() / HOUR),
        "lost_gpu_hours": float((jobs["lost_s"] * jobs["gpus"]).sum() / HOUR),
        "slowdown_mean": float(done["slowdown"].mean()) if len(done) else np.nan,
    }


def group_table(
    jobs: pd.DataFrame,
    rounds: pd.DataFrame,
    guarantees: Mapping[str, int],
    span: float,
    until: float,
) -> pd.DataFrame:
    """The per-class and per-tenant rows (see the module docstring).

    ``guarantees`` maps tenants to guaranteed GPUs; ``span`` is the run's
    length for mean GPUs; ``until`` the time the last round's state holds to.
    """
    rows: dict[str, dict[str, Any]] = {}
    for name, members in jobs.groupby("priority_class", sort=True):
        rows[f"class:{name}"] = _figures(members)
    tenants = sorted(set(jobs["tenant"]) | set(guarantees))
    for name in tenants:
        row = _figures(jobs[jobs["tenant"] == name])
        row["mean_gpus"] = row["gpu_hours"] * HOUR / span if span > 0 else 0.0
        guaranteed = guarantees.get(name)
        row["guaranteed_gpus"] = guaranteed if guaranteed else np.nan
        row["share_vs_guarantee"] = row["mean_gpus"] / guaranteed if guaranteed else np.nan
        row["guarantee_shortfall_gpu_h"] = (
            integral(rounds, f"owed[{name}]", until) / HOUR if guaranteed else np.nan
        )
        rows[f"tenant:{name}"] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def flatten(groups: pd.DataFrame) -> dict[str, Any]:
    """The groups' headline figures as summary entries ``<figure>[<group>]``."""
    out: dict[str, Any] = {}
    for group, row in groups.iterrows():
        for figure in SUMMARY_FIGURES:
            value = row.get(figure, np.nan)
            if figure in ("share_vs_guarantee", "guarantee_shortfall_gpu_h") and pd.isna(value):
                continue  # only tenants with a guarantee have these
            out[f"{figure}[{group}]"] = value
    return out
