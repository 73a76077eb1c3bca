"""Load test of ``whale-opt serve``: many concurrent clients posting solves.

Starts a server on 127.0.0.1 (a free port, a temporary SQLite file) unless
``--url`` names one already running on the loopback interface, then runs
``--clients`` asyncio clients (httpx) that share ``--requests`` POST
/v1/solve requests of one generated instance (``hetero``, 128 GPUs by
default). Prints the latency p50/p90/p99/max, the throughput and the
errors (any answer but 200, or a failed connection); exits 1 on any error.

    python bench/service_load.py                      # 50 clients, 2,000 solves
    python bench/service_load.py --requests 300       # a quicker run

Traffic goes to 127.0.0.1 only (refused otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import httpx

from whale_opt.generate import generate
from whale_opt.io import instance_to_dict

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(workers: int, queue: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``whale-opt serve`` in its own session on a free port; its URL once healthy."""
    port = _free_port()
    db = Path(tempfile.mkdtemp(prefix="whale-opt-load-")) / "state.db"
    command = [
        sys.executable,
        "-c",
        "from whale_opt.cli import main; main()",
        "serve",
        "--port",
        str(port),
        "--db",
        str(db),
        "--workers",
        str(workers),
        "--queue",
        str(queue),
        "--log-level",
        "warning",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("server did not start in 60 s")


async def run_load(
    url: str, body: dict[str, object], requests: int, clients: int, params: dict[str, str]
) -> tuple[list[float], Counter[str], float]:
    """Latencies (s) of the successful requests, outcome counts, wall time."""
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    remaining = requests
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                answer = await http.post("/v1/solve", json=body, params=params)
            except httpx.HTTPError as exc:
                outcomes[type(exc).__name__] += 1
                continue
            if answer.status_code == 200:
                latencies.append(time.perf_counter() - started)
            outcomes[str(answer.status_code)] += 1

    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - started
    return latencies, outcomes, wall


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=128)
    parser.add_argument("--queued", type=int, default=64)
    parser.add_argument("--solver", default="wspt")
    parser.add_argument("--time-limit", type=float, default=None, help="Per-request limit, s.")
    parser.add_argument(
        "--workers", type=int, default=2, help="Solver workers of the started server."
    )
    parser.add_argument("--queue", type=int, default=64, help="Waiting solves before 503.")
    parser.add_argument("--url", default=None, help="A running server (loopback only).")
    args = parser.parse_args()

    instance = generate("hetero", gpus=args.gpus, queued=args.queued)
    body = instance_to_dict(instance)
    params = {"solver": args.solver}
    if args.time_limit is not None:
        params["time_limit_s"] = str(args.time_limit)
    process = None
    if args.url is None:
        log = Path(tempfile.gettempdir()) / "whale-opt-load-server.log"
        process, url = start_server(args.workers, args.queue, log)
    else:
        url = args.url.rstrip("/")
        if urlparse(url).hostname not in LOOPBACK:
            raise SystemExit(
                "--url must be on 127.0.0.1 (this benchmark sends no traffic elsewhere)"
            )
    try:
        warm = httpx.post(f"{url}/v1/solve", json=body, params=params, timeout=120)
        warm.raise_for_status()
        latencies, outcomes, wall = asyncio.run(
            run_load(url, body, args.requests, args.clients, params)
        )
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    errors = sum(count for outcome, count in outcomes.items() if outcome != "200")
    gpus = sum(node.gpu_count for node in instance.nodes)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    queued, running = len(instance.queue), len(instance.running)
    print(
        f"instance: hetero, {gpus} GPUs, {queued} queued, {running} running;"
        f" solver {args.solver}; server workers {args.workers}"
    )
    print(f"requests: {args.requests} from {args.clients} concurrent clients")
    print(f"outcomes: {dict(sorted(outcomes.items()))}  errors: {errors}")
    if latencies:
        p50, p90, p99 = (_percentile(latencies, share) for share in (0.5, 0.9, 0.99))
        print(
            f"latency s: p50 {p50:.3f}  p90 {p90:.3f}  p99 {p99:.3f}"
            f"  max {max(latencies):.3f}  mean {statistics.fmean(latencies):.3f}"
        )
    print(f"throughput: {len(latencies) / wall:.1f} solves/s over {wall:.1f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
