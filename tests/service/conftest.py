"""Fixtures of the service tests: small instances, an app on a fresh database, a real server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from whale_opt.generate import generate
from whale_opt.io import instance_to_dict, load_json
from whale_opt.service import ServiceConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "instances" / "small" / "two-racks-mixed.json"


@pytest.fixture(scope="session")
def small_raw() -> dict[str, Any]:
    """The two-rack example of FORMAT.md as instance@1 JSON."""
    raw: dict[str, Any] = load_json(SMALL)
    return raw


@pytest.fixture(scope="session")
def hetero_raw() -> dict[str, Any]:
    """A generated 128-GPU heterogeneous cluster with 20 queued jobs."""
    return instance_to_dict(generate("hetero", gpus=128, queued=20))


def _make_client(tmp_path: Path, **settings: Any) -> TestClient:
    settings.setdefault("pool", "thread")
    settings.setdefault("db", str(tmp_path / "state.db"))
    return TestClient(create_app(ServiceConfig(**settings)), raise_server_exceptions=False)


@pytest.fixture
def make_client(tmp_path: Path) -> Any:
    """``make_client(**settings)``: a TestClient of an app on a fresh SQLite file
    (thread pool unless asked); use it as a context manager to start the app."""
    return lambda **settings: _make_client(tmp_path, **settings)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """A started app on a fresh database, no auth."""
    with _make_client(tmp_path) as started:
        yield started


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """``whale-opt serve`` in a subprocess of its own session (SIGKILL takes it whole)."""

    def __init__(self, db: Path, log: Path, *args: str) -> None:
        self.db, self.log, self.args = db, log, args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start and wait for /healthz."""
        entry = "from whale_opt.cli import main; main()"
        command = [sys.executable, "-c", entry, "serve", "--port", str(self.port)]
        command += ["--db", str(self.db), *self.args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the server and its worker processes, as a crash or the OOM killer would."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), else kill."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    """Make servers on ``tmp_path``; each is stopped at the end."""
    made: list[Server] = []

    def make(db: Path, *args: str) -> Server:
        server = Server(db, tmp_path / "server.log", *args)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()
