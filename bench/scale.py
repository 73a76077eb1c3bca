"""10,000 GPUs / 5,000 queued: the list schedule and a 30 s CP-SAT round, before and after.

Run ``python bench/scale.py --before DIR`` where DIR is a clean checkout of the
code to compare with (``git clone -q . /tmp/before`` before changing it); it
writes ``bench/SCALE.md``. Without ``--before`` only the current code is
measured. Each measurement runs in a fresh interpreter (``--worker``), with
``PYTHONPATH`` at the code measured; before and after alternate (A/B), so a
busy machine slows both alike. Instances: ``generate("hetero", gpus=10000,
queued=5000, seed=S)`` (its running jobs included).

- ``list``: the WSPT list schedule of the whole round
  (:func:`whale_opt.placement.serial.list_schedule` in
  :func:`whale_opt.policies.wspt.wspt_order`): wall and CPU seconds, and a
  digest of its decisions (equal digests: identical placements).
- ``solve``: ``solve(instance, "cpsat", time_limit_s=30)``: wall seconds, jobs
  deferred because the queue was too long for one round (the tail), the
  other deferrals by reason, objective, bound and the checker's verdict.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GPUS, QUEUED = 10_000, 5_000


def _instance(seed: int) -> Any:
    from whale_opt.generate import generate

    return generate("hetero", gpus=GPUS, queued=QUEUED, seed=seed)


def _list(seed: int) -> dict[str, Any]:
    from whale_opt.decision import objective, with_dropped
    from whale_opt.placement.serial import list_schedule
    from whale_opt.policies.wspt import wspt_order

    instance = _instance(seed)
    wall, cpu = time.perf_counter(), time.process_time()
    jobs = list_schedule(instance, wspt_order(instance))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    value = objective(instance, with_dropped(instance, tuple(jobs)))
    placed = [(j.id, j.action.value, j.start_s, j.end_s, j.nodes, j.gpu_ids) for j in jobs]
    digest = hashlib.sha256(repr(placed).encode()).hexdigest()[:12]
    actions = Counter(j.action.value for j in jobs)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "objective": value,
        "digest": digest,
        "actions": dict(actions),
        "gpus": sum(node.gpu_count for node in instance.nodes),
        "nodes": len(instance.nodes),
        "running": len(instance.running),
        "queued": len(instance.queue),
    }


def _solve(seed: int, limit_s: float) -> dict[str, Any]:
    from whale_opt.budget import TAIL_REASON
    from whale_opt.check import check
    from whale_opt.solve import solve

    instance = _instance(seed)
    wall = time.perf_counter()
    decision = solve(instance, "cpsat", time_limit_s=limit_s)
    wall = time.perf_counter() - wall
    reasons = Counter(
        item.reason or ""
        for item in decision.jobs
        if item.action.value == "deferred" and item.reason != TAIL_REASON
    )
    return {
        "wall_s": wall,
        "tail": sum(item.reason == TAIL_REASON for item in decision.jobs),
        "deferred": sum(item.action.value == "deferred" for item in decision.jobs),
        "reasons": dict(reasons),
        "actions": dict(Counter(item.action.value for item in decision.jobs)),
        "objective": decision.objective,
        "bound": decision.bound,
        "violations": len(check(instance, decision)),
    }


def _run(code: Path, what: str, seed: int, limit_s: float) -> dict[str, Any]:
    """One measurement in a fresh interpreter, on the code at ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, __file__, "--worker", what, "--seed", str(seed)]
    argv += ["--limit", str(limit_s)]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _ratio(before: float, after: float) -> str:
    return f"{before / after:.1f}x" if after else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a clean checkout of the code before")
    parser.add_argument("--seeds", default="1", help="comma-separated generator seeds")
    parser.add_argument("--limit", type=float, default=30.0, help="the round's time limit, s")
    parser.add_argument("--out", type=Path, default=HERE / "SCALE.md")
    parser.add_argument("--worker", choices=("list", "solve"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        found = _list(args.seed) if args.worker == "list" else _solve(args.seed, args.limit)
        print(json.dumps(found))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    codes = {"after": ROOT} | ({"before": args.before} if args.before else {})
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for seed in seeds:
        for what in ("list", "solve"):
            for name in sorted(codes, reverse=bool(seed % 2)):  # alternate who goes first
                print(f"seed {seed} {what} {name} ...", file=sys.stderr, flush=True)
                runs[(name, what, seed)] = _run(codes[name], what, seed, args.limit)
    args.out.write_text(_report(args, seeds, list(codes), runs))
    print(f"wrote {args.out}", file=sys.stderr)


def _report(
    args: argparse.Namespace,
    seeds: list[int],
    names: list[str],
    runs: dict[tuple[str, str, int], dict[str, Any]],
) -> str:
    command = "python bench/scale.py " + " ".join(sys.argv[1:])
    lines = [
        "# 10,000 GPUs / 5,000 queued: list schedule and 30 s round",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()},"
        " shared with other work while measured (wall times are noisy; CPU times less so;"
        " before and after alternate)",
        f"- Python {platform.python_version()}",
        f"- command: `{command.strip()}`",
        f"- instances: `whale_opt.generate.generate('hetero', gpus={GPUS}, queued={QUEUED},"
        " seed=S)`, running jobs included",
        "",
        "## The list schedule alone (WSPT order, whole cluster, one process)",
        "",
        "| seed | GPUs | nodes | running | queued | code | wall s | CPU s | objective |"
        " decisions digest |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        for name in names:
            r = runs[(name, "list", seed)]
            lines.append(
                f"| {seed} | {r['gpus']} | {r['nodes']} | {r['running']} | {r['queued']} | {name}"
                f" | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['objective']:.4g}"
                f" | `{r['digest']}` |"
            )
    if "before" in names:
        lines += ["", "Speed-up (before / after):"]
        for seed in seeds:
            b, a = runs[("before", "list", seed)], runs[("after", "list", seed)]
            same = "identical" if b["digest"] == a["digest"] else "DIFFERENT"
            lines.append(
                f"- seed {seed}: wall {_ratio(b['wall_s'], a['wall_s'])},"
                f" CPU {_ratio(b['cpu_s'], a['cpu_s'])}; decisions {same}"
            )
    lines += [
        "",
        f"## `solve(instance, 'cpsat', time_limit_s={args.limit:g})`",
        "",
        "| seed | code | wall s | deferred for lack of time | deferred, other reasons | "
        "objective | vs the list schedule | bound | checker |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        for name in names:
            r = runs[(name, "solve", seed)]
            verdict = "valid" if r["violations"] == 0 else f"{r['violations']} violations"
            other = r["deferred"] - r["tail"]
            greedy = runs[("after", "list", seed)]["objective"]
            versus = f"{(r['objective'] - greedy) / greedy:+.1%}"
            lines.append(
                f"| {seed} | {name} | {r['wall_s']:.1f} | {r['tail']} | {other} |"
                f" {r['objective']:.4g} | {versus} | {r['bound']:.4g} | {verdict} |"
            )
    lines += [
        "",
        '"vs the list schedule": the objective against the whole-cluster WSPT list',
        "schedule's above (the pools see only their own racks; a split round returns that",
        "list schedule when the merged pools do not beat it).",
        "",
        "Deferred for other reasons (after):",
        "",
    ]
    for seed in seeds:
        reasons = runs[("after", "solve", seed)]["reasons"]
        listed = "; ".join(f"{n} x {why}" for why, n in sorted(reasons.items()))
        lines.append(f"- seed {seed}: {listed or 'none'}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
