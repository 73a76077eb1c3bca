"""Benchmark report: every policy on real traces and generated families, and solver scaling.

Run alone on an idle machine (``make bench``)::

    .venv/bin/python bench/report.py                 # the full report
    .venv/bin/python bench/report.py --openb-jobs 2000 --skip-scaling
    .venv/bin/python bench/report.py --quick --out /tmp/report   # tiny, for tests

It writes ``RESULTS.md`` and PNG plots into ``--out`` (default ``bench/``).
Studies:

- **openb** (Alibaba GPU v2023): the cluster of its GPU node list, the trace of
  its default pod list (all of it), compressed to each ``--load``
  (``whale_opt.sim.load``), and its first ``--own-load-jobs`` (1,000) at the
  recorded load, where nothing waits; every policy of the simulator.
- **philly**: the Philly machine list and its first ``--philly-jobs`` (1,000)
  jobs of >= 4 GPUs, same treatment.
- **families**: generated clusters (``whale_opt.sim.synthetic``) and seeded traces.
- **scaling**: one round of ``wspt`` and ``cpsat`` on generated instances from
  128 to ~10,000 GPUs: wall time, first-decision time, gap to the lower bound.

The lower bound of a run's weighted JCT is each job's run time alone on its
fastest eligible GPU type (no wait), weighted like the JCT. Every simulated
round's decision goes through the public checker when ``--check`` is on
(always in ``--quick``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt
import numpy as np
import ortools
import pandas as pd

from whale_opt.check import check
from whale_opt.convert.openb import read_openb_cluster, read_openb_trace
from whale_opt.convert.philly import read_philly_cluster, read_philly_trace
from whale_opt.generate import generate
from whale_opt.problem_data import Instance
from whale_opt.sim import SimConfig, simulate, synthetic_cluster, synthetic_trace
from whale_opt.sim.load import at_load, offered_load
from whale_opt.sim.metrics import SimResult
from whale_opt.sim.plots import plot_all, save
from whale_opt.sim.trace import TraceJob
from whale_opt.solve import solve

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = ROOT.parent / "shared" / "data" / "traces"
POLICIES = ("fifo", "sjf", "wspt", "best-fit", "frag-aware", "las", "hybrid", "cpsat")


@dataclass(frozen=True)
class Study:
    """One trace on one cluster, at the trace's own load or compressed to ``load``."""

    name: str
    cluster: Instance
    trace: tuple[TraceJob, ...]
    origin: str
    load: float | None = None  # None: the trace's own load


@dataclass
class Settings:
    """What the report runs; ``quick`` shrinks everything to test size."""

    out: Path = HERE
    policies: tuple[str, ...] = POLICIES
    loads: tuple[float, ...] = (0.8,)
    openb_jobs: int | None = None
    philly_jobs: int | None = 1000
    own_load_jobs: int | None = 1000  # at the recorded load nothing waits: a head suffices
    family_jobs: int = 200
    family_gpus: int = 256
    cpsat_limit_s: float = 1.0
    batch_s: int = 60
    scaling: tuple[tuple[int, int, float], ...] = (
        (128, 64, 1.0),
        (512, 256, 2.0),
        (1024, 500, 5.0),
        (2048, 1000, 10.0),
        (4096, 2000, 15.0),
        (10_000, 5_000, 30.0),
    )
    families: tuple[str, ...] = ("hetero", "dgx1", "fragmented")
    check: bool = False
    seed: int = 0
    openb_nodes: Path = TRACES / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
    openb_pods: Path = TRACES / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
    philly_machines: Path = TRACES / "philly" / "cluster_machine_list.csv"
    philly_jobs_file: Path = TRACES / "philly" / "jobs_ge4gpu_pass.json"
    notes: list[str] = field(default_factory=list)


def quick(out: Path) -> Settings:
    """A report of a few seconds on the test excerpts: every code path, tiny sizes."""
    data = ROOT / "tests" / "data" / "traces"
    return Settings(
        out=out,
        policies=("fifo", "best-fit", "wspt", "cpsat"),
        loads=(0.8,),
        openb_jobs=30,
        philly_jobs=12,
        family_jobs=16,
        family_gpus=32,
        cpsat_limit_s=0.1,
        scaling=((32, 12, 0.3), (64, 24, 0.3)),
        families=("hetero",),
        check=True,
        openb_nodes=data / "openb_nodes.csv",
        openb_pods=data / "openb_pods.csv",
        philly_machines=data / "philly_machines.csv",
        philly_jobs_file=data / "philly_jobs.json",
    )


# -- studies -------------------------------------------------------------------------


def _head(trace: tuple[TraceJob, ...], jobs: int | None) -> tuple[TraceJob, ...]:
    ordered = tuple(sorted(trace, key=lambda job: (job.submit_s, job.id)))
    return ordered if jobs is None else ordered[:jobs]


def trace_studies(settings: Settings) -> list[Study]:
    """openb and Philly, each at its own load and at every ``settings.loads``."""
    studies: list[Study] = []
    sources: list[tuple[str, Instance, tuple[TraceJob, ...], str]] = []
    if settings.openb_nodes.exists() and settings.openb_pods.exists():
        cluster, nodes = read_openb_cluster(settings.openb_nodes)
        trace, pods = read_openb_trace(settings.openb_pods)
        settings.notes.append(
            f"openb: {nodes.nodes} GPU nodes / {nodes.gpus} GPUs; {pods.rows} pods -> "
            f"{pods.jobs} jobs ({pods.fractional} fractional-GPU pods take a whole GPU, "
            f"{pods.pending_skipped} pending pods without a schedule time skipped, "
            f"{pods.cpu_only_skipped} CPU-only skipped, {pods.censored} still running at the "
            "trace's end: their duration is a lower bound)"
        )
        sources.append(
            ("openb", cluster, _head(trace, settings.openb_jobs), str(settings.openb_pods))
        )
    else:
        settings.notes.append(f"openb: not found at {settings.openb_pods}; skipped")
    if settings.philly_machines.exists() and settings.philly_jobs_file.exists():
        cluster, _ = read_philly_cluster(settings.philly_machines)
        trace, report = read_philly_trace(settings.philly_jobs_file)
        gpu_total = sum(n.gpu_count for n in cluster.nodes)
        settings.notes.append(
            f"philly: {len(cluster.nodes)} machines / {gpu_total} GPUs;"
            f" {report.jobs} jobs of >= 4 GPUs ({report.multi_node} multi-node)"
        )
        philly = _head(trace, settings.philly_jobs)
        sources.append(("philly", cluster, philly, str(settings.philly_jobs_file)))
    else:
        settings.notes.append(f"philly: not found at {settings.philly_jobs_file}; skipped")
    for name, cluster, trace, origin in sources:
        studies.append(Study(f"{name}-own", cluster, _head(trace, settings.own_load_jobs), origin))
        for load in settings.loads:
            compressed, _ = at_load(trace, cluster, load)
            studies.append(Study(f"{name}-load{load * 100:.0f}", cluster, compressed, origin, load))
    return studies


def family_studies(settings: Settings) -> list[Study]:
    """Generated clusters and traces, at every ``settings.loads``."""
    studies = []
    for family in settings.families:
        cluster = synthetic_cluster(settings.family_gpus, family=family, seed=settings.seed)
        for load in settings.loads:
            drawn = synthetic_trace(settings.family_jobs, cluster, load=load, seed=settings.seed)
            trace, _ = at_load(drawn, cluster, load)  # the one definition of load
            name = f"{family}-load{load * 100:.0f}"
            studies.append(Study(name, cluster, trace, "whale_opt.sim.synthetic", load))
    return studies


# -- running -------------------------------------------------------------------------


def weighted_bound(trace: tuple[TraceJob, ...], cluster: Instance) -> float:
    """Weighted mean of each job's run time alone on its fastest eligible type."""
    queue = tuple(job.queued(job.actual_duration_s or job.duration_s) for job in trace)
    probe = cluster.replace(running=(), queue=queue)
    shortest = [probe.min_duration(k) for k in range(len(queue))]
    weights = [job.weight for job, s in zip(trace, shortest, strict=True) if s is not None]
    values = [s for s in shortest if s is not None]
    return float(np.dot(weights, values) / sum(weights)) if weights else float("nan")


def unallocated_while_waiting(result: SimResult) -> float:
    """Time-weighted mean of free healthy GPUs over the rounds that leave jobs queued."""
    rounds = result.rounds
    if rounds.empty:
        return 0.0
    times = rounds["time_s"].to_numpy(dtype=float)
    spans = np.diff(np.append(times, times[-1]))
    waiting = rounds["queued"].to_numpy() > 0
    total = spans[waiting].sum()
    free = rounds["free_gpus"].to_numpy(dtype=float)
    return float((free[waiting] * spans[waiting]).sum() / total) if total > 0 else 0.0


def run_study(study: Study, settings: Settings) -> list[SimResult]:
    """Every policy of ``settings`` on ``study``; prints one line per run."""
    results = []
    for policy in settings.policies:
        config = SimConfig(
            policy=policy,
            time_limit_s=settings.cpsat_limit_s,
            round_period_s=None,
            round_batch_s=settings.batch_s,
            seed=settings.seed,
            check_decisions=settings.check,
        )
        tic = time.perf_counter()
        result = simulate(study.trace, study.cluster, config)
        print(
            f"{study.name:>16} {policy:>10}: {time.perf_counter() - tic:7.1f} s wall, "
            f"{len(result.rounds)} rounds, weighted JCT {result.summary['weighted_jct_s']:.0f} s",
            flush=True,
        )
        results.append(result)
    return results


def study_table(study: Study, results: list[SimResult], bound: float) -> list[str]:
    rows = [
        "| policy | weighted JCT s | x bound | avg JCT s | queue delay p95 s | utilisation | "
        "free GPUs while jobs wait | completed | rounds | replay wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        s = result.summary
        rows.append(
            f"| {result.policy} | {s['weighted_jct_s']:.0f} | {s['weighted_jct_s'] / bound:.2f} | "
            f"{s['avg_jct_s']:.0f} | {s['queue_delay_s_p95']:.0f} | {s['gpu_utilisation']:.1%} | "
            f"{unallocated_while_waiting(result):.1f} | {s['completed']}/{s['jobs']} | "
            f"{s['rounds']} | {result.wall_s:.1f} |"
        )
    return rows


def targets(results: list[SimResult], bound: float, study: Study) -> list[str]:
    """Issue targets on a loaded study: cpsat vs heuristics, fifo, bound, best-fit."""
    by = {r.policy: r for r in results}
    if "cpsat" not in by:
        return []
    cpsat = by["cpsat"].summary["weighted_jct_s"]
    heuristics = {p: r.summary["weighted_jct_s"] for p, r in by.items() if p != "cpsat"}
    rows = ["| target | measured | |", "|---|---|---|"]

    def line(name: str, value: str, ok: bool) -> None:
        rows.append(f"| {name} | {value} | {'met' if ok else '**missed**'} |")

    if heuristics:
        best = min(heuristics, key=lambda p: heuristics[p])
        gain = 1 - cpsat / heuristics[best]
        line(
            "cpsat weighted JCT >= 10% below the best heuristic",
            f"{gain:.1%} ({best})",
            gain >= 0.10,
        )
    if "fifo" in heuristics:
        gain = 1 - cpsat / heuristics["fifo"]
        line("cpsat weighted JCT >= 30% below fifo", f"{gain:.1%}", gain >= 0.30)
    line("cpsat within 1.3x of the lower bound", f"{cpsat / bound:.2f}x", cpsat <= 1.3 * bound)
    if "best-fit" in by:
        mine = unallocated_while_waiting(by["cpsat"])
        theirs = unallocated_while_waiting(by["best-fit"])
        fewer = 1 - mine / theirs if theirs > 0 else 0.0
        how = f"{fewer:.0%} fewer" if fewer >= 0 else f"{-fewer:.0%} more"
        line(
            "free GPUs while jobs wait >= 20% fewer than best-fit",
            f"{mine:.1f} vs {theirs:.1f} ({how})",
            theirs > 0 and fewer >= 0.20,
        )
    walls = {p: r.wall_s for p, r in by.items()}
    if "wspt" in walls:
        line("replay with wspt <= 2 min", f"{walls['wspt']:.0f} s", walls["wspt"] <= 120)
    line("replay with cpsat <= 30 min", f"{walls['cpsat']:.0f} s", walls["cpsat"] <= 1800)
    return [f"Targets on {study.name} ({len(study.trace)} jobs):", "", *rows]


# -- solver scaling --------------------------------------------------------------------


def scaling(settings: Settings) -> tuple[list[str], pd.DataFrame]:
    rows = []
    for gpus, queued, limit in settings.scaling:
        inst = generate("hetero", gpus=gpus, queued=queued, seed=settings.seed)
        record: dict[str, float | int | str] = {"gpus": gpus, "queued": queued, "limit_s": limit}
        for solver in ("wspt", "cpsat"):
            tic = time.perf_counter()
            decision = solve(inst, solver, time_limit_s=limit)
            wall = time.perf_counter() - tic
            violations = check(inst, decision)
            if violations:
                raise SystemExit(f"{inst.name}: {solver} broke the rules: {violations[:3]}")
            record[f"{solver}_wall_s"] = wall
            record[f"{solver}_objective"] = decision.objective
            record[f"{solver}_gap"] = decision.gap
            record[f"{solver}_status"] = decision.status.value
        print(
            f"scaling {gpus:>6} GPUs / {queued:>5} queued: wspt {record['wspt_wall_s']:.1f} s, "
            f"cpsat {record['cpsat_wall_s']:.1f} s, gap {record['cpsat_gap']:.1%}",
            flush=True,
        )
        rows.append(record)
    frame = pd.DataFrame(rows)
    lines = [
        "| GPUs | queued | limit s | first decision (wspt) s | cpsat wall s | cpsat vs wspt | "
        "gap | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gain = 1 - float(r["cpsat_objective"]) / float(r["wspt_objective"])
        lines.append(
            f"| {r['gpus']} | {r['queued']} | {r['limit_s']} | {float(r['wspt_wall_s']):.2f} | "
            f"{float(r['cpsat_wall_s']):.2f} | {gain:.2%} better | {float(r['cpsat_gap']):.1%} | "
            f"{r['cpsat_status']} |"
        )
    return lines, frame


def plot_scaling(frame: pd.DataFrame, path: Path) -> Path:
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(frame["gpus"], frame["wspt_wall_s"], "o-", label="wspt (first decision)")
    left.plot(frame["gpus"], frame["cpsat_wall_s"], "s-", label="cpsat")
    left.plot(frame["gpus"], frame["limit_s"], "k:", label="time limit")
    left.set_xscale("log")
    left.set_xlabel("GPUs (queued = about half)")
    left.set_ylabel("wall time per round (s)")
    left.grid(alpha=0.3, which="both")
    right.plot(frame["gpus"], frame["wspt_gap"] * 100, "o-", label="wspt")
    right.plot(frame["gpus"], frame["cpsat_gap"] * 100, "s-", label="cpsat")
    right.set_xscale("log")
    right.set_xlabel("GPUs")
    right.set_ylabel("gap to lower bound (%)")
    right.grid(alpha=0.3, which="both")
    return save(figure, path)


# -- the report ------------------------------------------------------------------------


def machine(argv: list[str]) -> list[str]:
    return [
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        f"- Python {platform.python_version()}, OR-Tools {ortools.__version__}, "
        f"pandas {pd.__version__}, numpy {np.__version__}",
        f"- command: `python bench/report.py{' ' + ' '.join(argv) if argv else ''}`",
    ]


def report(settings: Settings, argv: list[str]) -> str:
    settings.out.mkdir(parents=True, exist_ok=True)
    plots = settings.out / "plots"
    started = time.perf_counter()
    sections = ["# Benchmark report", "", *machine(argv)]
    sections += [
        f"- simulator: event rounds batched every {settings.batch_s} s, seed {settings.seed}, "
        f"cpsat {settings.cpsat_limit_s} s a round; decisions checked: {settings.check}",
        "- lower bound of the weighted JCT: each job alone on its fastest eligible GPU type",
        "- 'free GPUs while jobs wait': time-weighted mean of healthy unallocated GPUs over "
        "rounds that end with jobs still queued",
        "",
    ]
    body: list[str] = []

    def write(done: bool) -> str:
        """RESULTS.md as far as it got: a long run leaves every finished study."""
        notes = [f"- {note}" for note in settings.notes]
        tail = f"Report took {time.perf_counter() - started:.0f} s." if done else "(running)"
        text = "\n".join([*sections, "## Data", "", *notes, "", *body, tail]) + "\n"
        (settings.out / "RESULTS.md").write_text(text)
        return text

    for study in trace_studies(settings) + family_studies(settings):
        if len(study.trace) < 2:
            continue
        results = run_study(study, settings)
        bound = weighted_bound(study.trace, study.cluster)
        load = offered_load(study.trace, study.cluster)
        body += [
            f"## {study.name}",
            "",
            f"{len(study.trace)} jobs from `{study.origin}` on {study.cluster.name} "
            f"({sum(n.gpu_count for n in study.cluster.nodes)} GPUs); offered load {load:.1%}"
            + (f" (arrivals compressed to {study.load:.0%})" if study.load else " (as recorded)")
            + f"; lower bound of the weighted JCT {bound:.0f} s.",
            "",
            *study_table(study, results, bound),
            "",
        ]
        if study.load is not None and study.load >= 0.8:
            body += [*targets(results, bound, study), ""]
        written = plot_all(results, plots / study.name)
        body += [f"![{p.stem}](plots/{study.name}/{p.name})" for p in written] + [""]
        write(done=False)
    if settings.scaling:
        lines, frame = scaling(settings)
        path = plot_scaling(frame, plots / "scaling.png")
        body += [
            "## Solver scaling (one round, generated `hetero` instances)",
            "",
            *lines,
            "",
            f"![scaling](plots/{path.name})",
            "",
        ]
    return write(done=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run on the test excerpts")
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--policies", default=None, help="comma-separated policy names")
    parser.add_argument("--loads", default=None, help="comma-separated offered loads")
    parser.add_argument("--openb-jobs", type=int, default=None, help="first N openb jobs")
    parser.add_argument("--philly-jobs", type=int, default=None, help="first N Philly jobs")
    parser.add_argument(
        "--own-load-jobs", type=int, default=None, help="first N jobs at the recorded load"
    )
    parser.add_argument("--cpsat-limit", type=float, default=None, help="cpsat s a round")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-families", action="store_true")
    parser.add_argument("--check", action="store_true", help="check every round's decision")
    args = parser.parse_args()
    settings = quick(args.out or HERE / "quick") if args.quick else Settings()
    if args.out is not None:
        settings.out = args.out
    if args.policies:
        settings.policies = tuple(args.policies.split(","))
    if args.loads:
        settings.loads = tuple(float(x) for x in args.loads.split(","))
    if args.openb_jobs is not None:
        settings.openb_jobs = args.openb_jobs
    if args.philly_jobs is not None:
        settings.philly_jobs = args.philly_jobs
    if args.own_load_jobs is not None:
        settings.own_load_jobs = args.own_load_jobs
    if args.cpsat_limit is not None:
        settings.cpsat_limit_s = args.cpsat_limit
    if args.skip_scaling:
        settings.scaling = ()
    if args.skip_families:
        settings.families = ()
    settings.check = settings.check or args.check
    print(report(settings, sys.argv[1:]))


if __name__ == "__main__":
    main()
