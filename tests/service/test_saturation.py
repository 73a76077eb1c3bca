"""Under load: 503 with Retry-After when the pool is full or a solve is late, never a hang;
a key or a cluster busy with a decide is a 409."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from whale_opt.service import ServiceConfig, create_app, work

GATE = threading.Event()
SOLVE_FILE = work.solve_file


def _blocked(*args: Any) -> Any:
    """A solve that waits for the test to open the gate."""
    GATE.wait(timeout=30)
    return SOLVE_FILE(*args)


@asynccontextmanager
async def _app(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    config = ServiceConfig(db=str(tmp_path / "s.db"), pool="thread", **settings)
    app = create_app(config)
    service = app.state.service
    service.start()
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http, service
    finally:
        GATE.set()
        service.stop()


async def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def test_saturated_pool_answers_503(
    tmp_path: Path, small_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(work, "solve_file", _blocked)
    GATE.clear()

    async def scenario() -> None:
        async with _app(tmp_path, workers=1, queue=1) as (http, service):
            first = asyncio.create_task(http.post("/v1/solve", json=small_raw))
            second = asyncio.create_task(http.post("/v1/solve", json=small_raw))
            await _until(lambda: service.pool.in_flight == 2)
            refused = await http.post("/v1/solve", json=small_raw)
            assert refused.status_code == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert (await http.get("/healthz")).status_code == 200  # the loop is free
            GATE.set()
            assert (await first).status_code == (await second).status_code == 200
            await _until(lambda: service.pool.in_flight == 0)
            assert (await http.post("/v1/solve", json=small_raw)).status_code == 200
            assert "whale_opt_rejected_total 1.0" in (await http.get("/metrics")).text

    asyncio.run(scenario())


def test_a_late_solve_is_a_503_not_a_hang(
    tmp_path: Path, small_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(work, "solve_file", _blocked)
    GATE.clear()

    async def scenario() -> None:
        async with _app(tmp_path, workers=1, queue=0, request_timeout_s=0.3) as (http, service):
            late = await http.post("/v1/solve", json=small_raw)
            assert late.status_code == 503 and "Retry-After" in late.headers
            # The solve still runs: its slot stays taken until it ends.
            assert service.pool.in_flight == 1
            assert (await http.post("/v1/solve", json=small_raw)).status_code == 503
            GATE.set()
            await _until(lambda: service.pool.in_flight == 0)

    asyncio.run(scenario())


def test_busy_key_and_busy_cluster_are_409(
    tmp_path: Path, hetero_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        async with _app(tmp_path, workers=2, queue=4) as (http, service):
            created = await http.post("/v1/clusters", json={"name": "c", "instance": hetero_raw})
            assert created.status_code == 201
            real = work.solve_round
            monkeypatch.setattr(work, "solve_round", lambda *a: (GATE.wait(30), real(*a))[1])
            GATE.clear()
            key = {"Idempotency-Key": "r"}
            first = asyncio.create_task(
                http.post("/v1/clusters/c/decide", json={"now": 1}, headers=key)
            )
            await _until(lambda: service.clusters["c"].deciding)
            same_key = await http.post("/v1/clusters/c/decide", json={"now": 1}, headers=key)
            assert same_key.status_code == 409 and "in progress" in same_key.json()["detail"]
            other = await http.post("/v1/clusters/c/decide", json={"now": 1})
            assert other.status_code == 409 and "deciding" in other.json()["detail"]
            job = {"id": "during", "gpus": 1, "duration_s": 60}
            submitted = await http.post("/v1/clusters/c/jobs", json={"job": job})
            assert submitted.status_code == 201  # submissions go on during a solve
            GATE.set()
            assert (await first).status_code == 200
            state = (await http.get("/v1/clusters/c")).json()
            assert state["decided_at"] == 1 and not state["deciding"]

    asyncio.run(scenario())


def test_a_round_sees_changes_made_during_its_solve(
    tmp_path: Path, hetero_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that goes down while a round is solved: the round is solved again."""

    async def scenario() -> None:
        async with _app(tmp_path, workers=2, queue=4) as (http, _):
            await http.post("/v1/clusters", json={"name": "c", "instance": hetero_raw})
            real = work.solve_round
            calls: list[int] = []

            def counted(*args: Any) -> Any:
                calls.append(1)
                if len(calls) == 1:
                    GATE.wait(30)
                return real(*args)

            monkeypatch.setattr(work, "solve_round", counted)
            GATE.clear()
            decide = asyncio.create_task(http.post("/v1/clusters/c/decide", json={"now": 1}))
            await _until(lambda: calls)
            node = hetero_raw["nodes"][1]["id"]
            down = await http.post(f"/v1/clusters/c/nodes/{node}/down", json={"now": 1})
            assert down.status_code == 200
            GATE.set()
            answer = await decide
            assert answer.status_code == 200 and len(calls) == 2
            used = {g.rpartition("/")[0] for j in answer.json()["jobs"] for g in j.get("gpus", [])}
            assert node not in used

    asyncio.run(scenario())
