"""How long a replay takes, before and after, and whether its decisions changed.

Run ``python bench/replay_speed.py --before DIR`` where DIR is a clean
checkout of the code to compare with (``git clone -q . /tmp/before``); it
writes ``bench/REPLAY_SPEED.md``. Each replay runs in a fresh interpreter
(``--worker``) with ``PYTHONPATH`` at the code measured; before and after
alternate (A/B, ``--repeat`` times), so a busy machine slows both alike.

The replay: the openb default pod list (Alibaba GPU v2023,
``openb_pod_list_default.csv``, whole GPUs: shares rounded up, CPU-only pods
left out, 6,203 jobs) on its GPU node list, ``SimConfig(policy=P)``
otherwise at its defaults (a round every 300 s and on events). Its decisions
are compared by digests: one of every attempt (job, start, end, GPUs,
outcome, ...) and one of the rounds table without its wall-time columns.
Equal digests: the same jobs started on the same GPUs at the same seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = ROOT.parent / "shared" / "data" / "traces" / "alibaba-gpu-v2023"
WALL_COLUMNS = ("round_wall_s", "solver_wall_s")


def digest(rows: list[dict[str, Any]], drop: tuple[str, ...] = ()) -> str:
    """A short hash of ``rows`` without the ``drop`` columns."""
    kept = [sorted((k, repr(v)) for k, v in row.items() if k not in drop) for row in rows]
    return hashlib.sha256(repr(kept).encode()).hexdigest()[:12]


def replay(policy: str, jobs: int | None, traces: Path = TRACES) -> dict[str, Any]:
    """One openb replay in this interpreter: wall time, rounds and digests."""
    from whale_opt.convert.openb import read_openb_cluster, read_openb_trace
    from whale_opt.sim import SimConfig
    from whale_opt.sim.simulator import Simulator

    cluster, _ = read_openb_cluster(traces / "openb_node_list_gpu_node.csv")
    pods = traces / "openb_pod_list_default.csv"
    # Whole GPUs only, as the simulator runs them (code before the sharing work
    # has no ``whole_gpus``: it always rounded shares up and dropped CPU-only pods).
    whole = "whole_gpus" in inspect.signature(read_openb_trace).parameters
    trace, _ = read_openb_trace(pods, whole_gpus=True) if whole else read_openb_trace(pods)
    trace = tuple(sorted(trace, key=lambda job: (job.submit_s, job.id))[:jobs])
    tic = time.perf_counter()
    simulator = Simulator(trace, cluster, SimConfig(policy=policy))
    simulator.run()
    wall = time.perf_counter() - tic
    record = simulator.loop.record
    return {
        "wall_s": wall,
        "jobs": len(trace),
        "rounds": len(record.rounds),
        "segments": digest(record.segments),
        "rounds_digest": digest(record.rounds, WALL_COLUMNS),
        "end_s": record.end_s,
    }


def run_worker(code: Path, policy: str, jobs: int | None, traces: Path = TRACES) -> dict[str, Any]:
    """:func:`replay` in a fresh interpreter with the code at ``code``."""
    env = dict(os.environ, PYTHONPATH=str(code))
    args = [sys.executable, __file__, "--worker", "--policy", policy, "--traces", str(traces)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=code)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--after", type=Path, default=ROOT, help="the code measured (this tree)")
    parser.add_argument("--policy", default="wspt")
    parser.add_argument("--jobs", type=int, default=None, help="the first N jobs only")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--traces", type=Path, default=TRACES, help="the openb CSVs' folder")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(replay(args.policy, args.jobs, args.traces)))
        return
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(args.repeat):
        if args.before is not None:
            runs["before"].append(run_worker(args.before, args.policy, args.jobs, args.traces))
            print("before", runs["before"][-1], flush=True)
        runs["after"].append(run_worker(args.after, args.policy, args.jobs, args.traces))
        print("after", runs["after"][-1], flush=True)
    if args.out is not None:
        args.out.write_text(report(runs, args))
        print(f"wrote {args.out}")


def report(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    """The markdown table of the runs, and the ratio of the medians."""
    jobs = "all" if args.jobs is None else f"the first {args.jobs}"
    command = f"python bench/replay_speed.py --before DIR --policy {args.policy}"
    command += "" if args.jobs is None else f" --jobs {args.jobs}"
    command += f" --repeat {args.repeat} --out bench/REPLAY_SPEED.md"
    lines = [
        "| code | run | wall (s) | jobs | rounds | attempts digest | rounds digest |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in runs.items():
        for k, row in enumerate(rows):
            lines.append(
                f"| {name} | {k + 1} | {row['wall_s']:.1f} | {row['jobs']} | {row['rounds']}"
                f" | `{row['segments']}` | `{row['rounds_digest']}` |"
            )
    median = {
        name: sorted(r["wall_s"] for r in rows)[len(rows) // 2]
        for name, rows in runs.items()
        if rows
    }
    summary = [
        f"openb default replay ({jobs} jobs), policy {args.policy}, on {platform.node()}"
        f" ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; the"
        " machine was shared with other work).",
        "",
        f"Command: `{command}`",
    ]
    if "before" in median and "after" in median:
        same = all(
            b["segments"] == a["segments"] and b["rounds_digest"] == a["rounds_digest"]
            for b, a in zip(runs["before"], runs["after"], strict=True)
        )
        summary += [
            "",
            f"Median wall: {median['before']:.1f} s before, {median['after']:.1f} s after"
            f" ({median['before'] / median['after']:.1f}x faster);"
            f" decisions {'identical' if same else 'DIFFERENT'} (digests).",
        ]
    return "\n".join([*summary, "", *lines]) + "\n"


if __name__ == "__main__":
    main()
