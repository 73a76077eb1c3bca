"""Replays of real workloads at a load where scheduling matters: openb with its GPU
shares, Philly's >= 4-GPU jobs, and a Gavel-style heterogeneous stream.

Run alone on an idle machine, from a clean clone (each writes its report)::

    PYTHONPATH=<clone> python <clone>/bench/load_replays.py openb    # bench/REPLAY_OPENB.md
    PYTHONPATH=<clone> python <clone>/bench/load_replays.py philly   # bench/REPLAY_PHILLY.md
    PYTHONPATH=<clone> python <clone>/bench/load_replays.py gavel    # bench/REPLAY_GAVEL.md
    python bench/load_replays.py philly --jobs 300 --policies wspt   # a quick look

At their recorded times the real traces barely load their clusters (openb:
about 0.1% of 6,212 GPUs over 149 days; Philly's >= 4-GPU jobs: about 13%
of 2,490 GPUs), so nothing queues and every policy ties. Two scalings
(:mod:`whale_opt.sim.load`) bring a trace to ``--load`` (default 90%):

- **the cluster** is sampled (:func:`~whale_opt.sim.load.sample_nodes`):
  ``--nodes-share`` of each GPU model's nodes, uniformly at random (seeded),
  at least one and always the model's largest node, so the type mix stays
  and every job still has a node it fits; the kept nodes are racked anew as
  the converters rack (16 nodes of one type a rack). For Philly the share defaults to
  the one that brings the recorded arrivals to the load, so arrivals keep
  their recorded spacing;
- **the arrivals** are then compressed or stretched
  (:func:`~whale_opt.sim.load.at_load`) to the exact load.

The Gavel-style stream (:mod:`whale_opt.convert.gavel_stream`) is Gavel's
own evaluation: single-GPU jobs with Poisson arrivals at ``--rates`` jobs an
hour on 36 V100 + 36 P100 + 36 K80, each a Gavel job class with its measured
throughputs. It reports the average JCT over the first ``--first`` jobs, as
Gavel does, beside the floor: each of those jobs alone on its fastest type.

Every round of every replay is checked (``check_decisions``). Policies decide
in event rounds batched ``--batch`` seconds; cpsat gets ``--cpsat-limit``
seconds a round.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import ortools

from whale_opt.convert import (
    DEFAULT_ASSUMPTIONS,
    read_gavel,
    read_openb_cluster,
    read_openb_trace,
)
from whale_opt.convert.gavel_stream import fluid_capacity_per_h, gavel_cluster, stream
from whale_opt.convert.philly import read_philly_cluster, read_philly_trace
from whale_opt.problem_data import MILLI, Instance
from whale_opt.sim import SimConfig, SimResult, simulate
from whale_opt.sim.floor import over_floor, replay_floor
from whale_opt.sim.load import at_load, offered_load, sample_nodes
from whale_opt.sim.metrics import gpu_seconds
from whale_opt.sim.trace import TraceJob

HERE = Path(__file__).resolve().parent
TRACES = HERE.parents[1] / "shared" / "data" / "traces"
HEURISTICS = ("fifo", "sjf", "wspt", "best-fit", "frag-aware", "las", "hybrid")


def replay(
    trace: tuple[TraceJob, ...], cluster: Instance, args: argparse.Namespace
) -> list[tuple[str, SimResult, float]]:
    """Every policy of ``--policies`` on ``trace``: (policy, result, wall seconds)."""
    cluster = with_policy(cluster, args)
    out = []
    for policy in args.policies.split(","):
        config = SimConfig(
            policy=policy,
            time_limit_s=args.cpsat_limit if policy == "cpsat" else None,
            round_period_s=None,
            round_batch_s=args.batch,
            seed=args.seed,
            check_decisions=True,
        )
        started = time.perf_counter()
        result = simulate(trace, cluster, config)
        wall = time.perf_counter() - started
        print(f"{policy}: {wall:.0f} s, {result.summary['completed']} completed", flush=True)
        out.append((policy, result, wall))
    return out


def table(runs: list[tuple[str, SimResult, float]], floor_s: float) -> list[str]:
    """One row a policy: JCTs (and the weighted one over the replay's floor),
    queueing delay, allocation, and cpsat against the best."""
    rows = [
        "| policy | completed | weighted JCT h | x floor | avg JCT h | queue delay p50 min |"
        " queue delay p95 min | allocated GPU | rounds | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, result, wall in runs:
        s = result.summary
        ratio = over_floor(s, floor_s)  # none when jobs were left unfinished
        rows.append(
            f"| {policy} | {s['completed']}/{s['jobs']} | {s['weighted_jct_s'] / 3600:.2f} |"
            f" {'-' if ratio is None else f'{ratio:.3f}'} |"
            f" {s['avg_jct_s'] / 3600:.2f} | {s['queue_delay_s_p50'] / 60:.1f} |"
            f" {s['queue_delay_s_p95'] / 60:.1f} | {s['gpu_utilisation']:.1%} |"
            f" {s['rounds']} | {wall:.0f} |"
        )
    by_policy = {policy: result.summary["weighted_jct_s"] for policy, result, _ in runs}
    heuristics = {p: v for p, v in by_policy.items() if p != "cpsat" and not math.isnan(v)}
    if "cpsat" in by_policy and heuristics:
        best = min(heuristics, key=lambda p: heuristics[p])
        change = by_policy["cpsat"] / heuristics[best] - 1
        rows += ["", f"cpsat against the best heuristic ({best}): {change:+.1%} weighted JCT."]
    return [*rows, "", floor_line(floor_s)]


def floor_line(floor_s: float, of: str = "") -> str:
    return (
        f"The replay's floor{of}: {floor_s / 3600:.2f} h weighted JCT. No schedule beats it, not"
        " even one that knows every arrival and preempts for free (`whale_opt.sim.floor`)."
    )


def floor_of(trace: tuple[TraceJob, ...], cluster: Instance, args: argparse.Namespace) -> float:
    """The replay's floor (``whale_opt.sim.floor``) under the replays' own seed."""
    started = time.perf_counter()
    floor = replay_floor(trace, cluster, SimConfig(seed=args.seed))
    print(f"floor: {floor / 3600:.2f} h, {time.perf_counter() - started:.0f} s", flush=True)
    return floor


def with_policy(cluster: Instance, args: argparse.Namespace) -> Instance:
    """``cluster`` with ``--max-wait``, ``--aging`` and ``--prices`` over its policy's own."""
    changes: dict[str, Any] = {}
    if args.prices:
        pairs = (item.split("=") for item in args.prices.split(","))
        changes["gpu_second_prices"] = {name: float(price) for name, price in pairs}
    if args.max_wait is not None:
        changes["max_wait_s"] = None if args.max_wait == "none" else int(args.max_wait)
    if args.aging is not None:
        changes["aging_per_hour"] = args.aging
    return cluster.replace(policy=replace(cluster.policy, **changes)) if changes else cluster


def header(title: str, args: argparse.Namespace, lines: list[str]) -> list[str]:
    ceiling = {None: "the policy's own", "none": "none"}.get(args.max_wait, f"{args.max_wait} s")
    aging = "the policy's own" if args.aging is None else f"{args.aging:g}"
    return [
        f"# {title}",
        "",
        f"- command: `{' '.join(['python bench/load_replays.py', *sys.argv[1:]])}`",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores; Python"
        f" {platform.python_version()}, OR-Tools {ortools.__version__}; one run",
        f"- event rounds batched {args.batch} s; cpsat {args.cpsat_limit:g} s a round; every"
        " decision checked. Method: the docstring of `bench/load_replays.py`.",
        f"- the cluster's wait ceiling: {ceiling}; aging {aging} per hour waited; GPU-second"
        f" prices: {args.prices or 'none'}",
        *(f"- {line}" for line in lines),
        "",
    ]


def openb(args: argparse.Namespace) -> list[str]:
    folder = args.data / "alibaba-gpu-v2023"
    full, _ = read_openb_cluster(folder / "openb_node_list_gpu_node.csv")
    trace, report = read_openb_trace(folder / "openb_pod_list_default.csv")
    trace = tuple(sorted(trace, key=lambda job: (job.submit_s, job.id)))[: args.jobs]
    capped = 0
    if args.cap_hours is not None:
        # Pods still running at the trace's end are censored there, weeks long: cap
        # every run time, so the load lands inside the arrival window.
        cap = round(args.cap_hours * 3600)
        capped = sum((job.actual_duration_s or 0) > cap for job in trace)
        trace = tuple(
            replace(job, actual_duration_s=min(job.actual_duration_s or cap, cap)) for job in trace
        )
    share = args.nodes_share or 0.05
    cluster = sample_nodes(full, share, args.seed, DEFAULT_ASSUMPTIONS.rack_size)
    trace, factor = at_load(trace, cluster, args.load)
    gpus = sum(node.gpu_count for node in cluster.nodes)
    shares = sum(job.gpu_milli < MILLI for job in trace)
    cpu_only = sum(job.gpus == 0 for job in trace)
    lines = [
        f"trace: {len(trace)} pods of `openb_pod_list_default.csv` ({shares} shares of a GPU,"
        f" {cpu_only} CPU-only; {report.pending_skipped} pending pods skipped), shares kept"
        + (
            f"; run times capped at {args.cap_hours:g} h ({capped} pods)"
            if args.cap_hours is not None
            else ""
        ),
        f"cluster: {share:.0%} of each GPU model's nodes of `openb_node_list_gpu_node.csv`:"
        f" {len(cluster.nodes)} nodes, {gpus} GPUs",
        f"arrivals compressed x{factor:.3g} to offered load {offered_load(trace, cluster):.0%}"
        f" (arrivals span {(trace[-1].submit_s - trace[0].submit_s) / 3600:.1f} h)",
    ]
    return header("openb in time, with GPU sharing", args, lines) + table(
        replay(trace, cluster, args), floor_of(trace, cluster, args)
    )


def philly_sample(
    args: argparse.Namespace,
) -> tuple[tuple[TraceJob, ...], Instance, set[str], list[str]]:
    """The Philly replay's trace and cluster: the first ``--jobs`` >= 4-GPU jobs on a
    uniform sample of each GPU model's nodes, arrivals scaled to ``--load``; the
    jobs wider than a node, and the lines that say how."""
    folder = args.data / "philly"
    full, _ = read_philly_cluster(folder / "cluster_machine_list.csv")
    trace, _ = read_philly_trace(folder / "jobs_ge4gpu_pass.json")
    trace = tuple(sorted(trace, key=lambda job: (job.submit_s, job.id)))[: args.jobs]
    recorded = offered_load(trace, full)
    share = args.nodes_share or min(1.0, recorded / args.load)
    cluster = sample_nodes(full, share, args.seed, DEFAULT_ASSUMPTIONS.rack_size)
    trace, factor = at_load(trace, cluster, args.load)
    gpus = sum(node.gpu_count for node in cluster.nodes)
    largest = max(node.gpu_count for node in cluster.nodes)
    wide = {job.id for job in trace if job.gpus > largest}
    lines = [
        f"trace: {len(trace)} jobs of >= 4 GPUs of `jobs_ge4gpu_pass.json` ({len(wide)} larger"
        f" than a node); recorded offered load {recorded:.1%} on the full cluster",
        f"cluster: {share:.1%} of each GPU model's nodes of `cluster_machine_list.csv`:"
        f" {len(cluster.nodes)} nodes, {gpus} GPUs",
        f"arrivals x{factor:.3g} to offered load {offered_load(trace, cluster):.0%}",
    ]
    return trace, cluster, wide, lines


def philly(args: argparse.Namespace) -> list[str]:
    trace, cluster, wide, lines = philly_sample(args)
    runs = replay(trace, cluster, args)
    return [
        *header("Philly's >= 4-GPU jobs at 90% load", args, lines),
        *table(runs, floor_of(trace, cluster, args)),
        "",
        *by_type(runs, wide),
    ]


def by_type(runs: list[tuple[str, SimResult, float]], wide: set[str]) -> list[str]:
    """Where each policy ran the work: GPU-hours by type, and the average JCT of the
    jobs wider than any node (``wide``: they may span nodes, and slow types) and of
    the rest."""
    types = sorted({t for _, result, _ in runs for t in result.segments["gpu_type"].dropna()})
    rows = [
        "GPU-hours by type, and the average JCT of the jobs wider than a node"
        f" ({len(wide)}) and of the others:",
        "",
        "| policy | " + " | ".join(f"{t} GPU-h" for t in types) + " | wide JCT h | others JCT h |",
        "|---|" + "---|" * (len(types) + 2),
    ]
    for policy, result, _ in runs:
        held = gpu_seconds(result.segments).groupby(result.segments["gpu_type"]).sum()
        jobs = result.jobs
        is_wide = jobs["id"].isin(wide)
        rows.append(
            f"| {policy} | "
            + " | ".join(f"{held.get(t, 0.0) / 3600:,.0f}" for t in types)
            + f" | {jobs[is_wide]['jct_s'].mean() / 3600:.1f}"
            f" | {jobs[~is_wide]['jct_s'].mean() / 3600:.1f} |"
        )
    return rows


def gavel(args: argparse.Namespace) -> list[str]:
    throughputs = read_gavel(args.data / "gavel" / "simulation_throughputs.json")
    cluster = gavel_cluster(36)
    capacity = fluid_capacity_per_h(cluster, throughputs)
    jobs = args.jobs or 1000
    out = header(
        "A Gavel-style heterogeneous stream",
        args,
        [
            "cluster: 36 V100-16G + 36 P100-16G + 36 K80-12G (4-GPU PCIe nodes); fluid"
            f" capacity {capacity:.2f} jobs/h",
            f"stream: {jobs} single-GPU jobs, seed {args.seed}; average JCT over the first"
            f" {args.first}, as Gavel reports it",
        ],
    )
    for rate in (float(r) for r in args.rates.split(",")):
        trace = stream(cluster, throughputs, jobs, rate, args.seed)
        head = {job.id for job in trace[: args.first]}
        floor = sum(min(s for _, s in job.duration_by_type_s) for job in trace[: args.first])
        floor_h = floor / len(head) / 3600
        runs = replay(trace, cluster, args)
        out += [
            f"## {rate:g} jobs/h ({rate / capacity:.0%} of the fluid capacity)",
            "",
            "| policy | avg JCT h, first jobs | x floor | weighted JCT h, all | wall s |",
            "|---|---|---|---|---|",
        ]
        for policy, result, wall in runs:
            first = result.jobs[result.jobs["id"].isin(head)]
            mean_h = float(first["jct_s"].mean()) / 3600
            out.append(
                f"| {policy} | {mean_h:.2f} | {mean_h / floor_h:.3f} |"
                f" {result.summary['weighted_jct_s'] / 3600:.2f} | {wall:.0f} |"
            )
        out += [
            "",
            f"Floor (each of the first {args.first} alone on its fastest type): {floor_h:.2f} h.",
            floor_line(floor_of(trace, cluster, args), f", all {jobs} jobs"),
            "",
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=("openb", "philly", "gavel"))
    parser.add_argument("--data", type=Path, default=TRACES, help="the traces folder")
    parser.add_argument("--jobs", type=int, default=None, help="the first N jobs only")
    parser.add_argument("--nodes-share", type=float, default=None)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--cap-hours", type=float, default=None, help="openb: cap run times")
    parser.add_argument("--rates", default="6,8", help="gavel: arrivals an hour")
    parser.add_argument("--first", type=int, default=300, help="gavel: jobs the JCT covers")
    parser.add_argument("--policies", default=",".join((*HEURISTICS, "cpsat")))
    parser.add_argument("--cpsat-limit", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=60, help="event-round batch seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-wait", default=None, help="wait ceiling: seconds or none (default: the cluster's)"
    )
    parser.add_argument("--aging", type=float, default=None, help="default: the cluster's")
    parser.add_argument(
        "--prices", default="", help="policy.gpu_second_prices as TYPE=PRICE,... (default: none)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    lines = {"openb": openb, "philly": philly, "gavel": gavel}[args.study](args)
    lines += ["", f"Took {time.perf_counter() - started:.0f} s.", ""]
    out = args.out or HERE / f"REPLAY_{args.study.upper()}.md"
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
