"""Durability: a real server killed with SIGKILL in the middle of a decide, restarted
on the same SQLite file, has lost no acknowledged submission and started no job twice."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from whale_opt.generate import generate
from whale_opt.io import instance_to_dict


def _submit_storm(url: str, stop: threading.Event, acked: list[str], first: int) -> None:
    """Submit jobs one after another until ``stop``; record those acknowledged (2xx)."""
    with httpx.Client(base_url=url, timeout=30) as http:
        k = first
        while not stop.is_set():
            job_id = f"storm-{k:05d}"
            job = {"id": job_id, "gpus": 1, "duration_s": 600, "submitted_at": 0}
            try:
                answer = http.post(
                    "/v1/clusters/big/jobs", json={"job": job}, headers={"Idempotency-Key": job_id}
                )
            except httpx.HTTPError:
                return  # the server is gone
            if answer.status_code == 201:
                acked.append(job_id)
            k += 1


def _state(url: str) -> dict[str, Any]:
    answer = httpx.get(f"{url}/v1/clusters/big", timeout=30)
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()
    return state


def _no_gpu_twice(state: dict[str, Any]) -> None:
    held = [gpu for job in state["running_jobs"] for gpu in job["gpus"]]
    assert len(held) == len(set(held)), "a GPU is held by two running jobs"
    queued = {job["id"] for job in state["queue"]}
    assert not queued & {job["id"] for job in state["running_jobs"]}


def test_kill_during_decide_loses_nothing_and_starts_nothing_twice(
    tmp_path: Path, server_factory: Any
) -> None:
    db = tmp_path / "state.db"
    server = server_factory(db, "--workers", "2", "--max-time-limit", "60")
    server.start()
    instance = instance_to_dict(generate("hetero", gpus=1024, queued=300, seed=3))
    http = httpx.Client(base_url=server.url, timeout=60)
    created = http.post(
        "/v1/clusters", json={"name": "big", "instance": instance, "policy": "cpsat"}
    )
    assert created.status_code == 201, created.text
    running_before = {job["id"] for job in _state(server.url)["running_jobs"]}

    # A decide that takes long (CP-SAT, 40 s limit) while submissions keep arriving.
    acked: list[str] = []
    stop = threading.Event()
    storm = threading.Thread(target=_submit_storm, args=(server.url, stop, acked, 0))
    decide_answer: list[httpx.Response] = []

    def decide() -> None:
        with contextlib.suppress(httpx.HTTPError):
            decide_answer.append(
                httpx.post(
                    f"{server.url}/v1/clusters/big/decide",
                    json={"now": 100, "time_limit_s": 40},
                    headers={"Idempotency-Key": "round-at-100"},
                    timeout=120,
                )
            )

    decider = threading.Thread(target=decide)
    decider.start()
    storm.start()
    deadline = time.monotonic() + 30
    while not _state(server.url)["deciding"]:
        assert time.monotonic() < deadline, "the decide never started"
        time.sleep(0.1)
    time.sleep(1.5)  # well inside the solve
    assert _state(server.url)["deciding"] and not decide_answer
    acked_before_kill = list(acked)
    server.kill()
    stop.set()
    storm.join(timeout=30)
    decider.join(timeout=30)
    assert not decide_answer, "the decide answered before the kill: nothing was tested"
    assert len(acked_before_kill) >= 5, "too few submissions during the solve"

    server.start()
    state = _state(server.url)
    queued = {job["id"] for job in state["queue"]}
    assert set(acked) <= queued, "an acknowledged submission was lost"
    assert {job["id"] for job in state["running_jobs"]} == running_before, (
        "the killed decide left a trace"
    )
    assert state["decided_at"] is None
    _no_gpu_twice(state)

    # The retried decide (same key) runs now; then a kill right after its answer.
    answer = http.post(
        "/v1/clusters/big/decide",
        json={"now": 100, "time_limit_s": 3},
        headers={"Idempotency-Key": "round-at-100"},
    )
    assert answer.status_code == 200, answer.text
    started = {job["id"] for job in answer.json()["jobs"] if job["action"] == "start"}
    assert started
    # Submitted without submitted_at: stamped with the clock (100), and the log keeps it.
    late = {"id": "late", "gpus": 1, "duration_s": 600}
    stamped = http.post("/v1/clusters/big/jobs", json={"job": late})
    assert stamped.status_code == 201 and stamped.json()["submitted_at"] == 100, stamped.text
    seq = _state(server.url)["seq"]
    server.kill()
    server.start()
    state = _state(server.url)
    assert state["seq"] == seq and state["decided_at"] == 100
    assert http.get("/v1/clusters/big/jobs/late").json()["submitted_at"] == 100
    assert started <= {job["id"] for job in state["running_jobs"]}
    _no_gpu_twice(state)

    # The same key again: the stored decision, no second effect.
    again = http.post(
        "/v1/clusters/big/decide",
        json={"now": 100, "time_limit_s": 3},
        headers={"Idempotency-Key": "round-at-100"},
    )
    assert again.status_code == 200 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == answer.json()
    assert _state(server.url)["seq"] == seq
    # A later round starts none of the jobs already started.
    later = http.post("/v1/clusters/big/decide", json={"now": 200, "time_limit_s": 2})
    assert later.status_code == 200, later.text
    assert not started & {job["id"] for job in later.json()["jobs"] if job["action"] == "start"}
    http.close()
