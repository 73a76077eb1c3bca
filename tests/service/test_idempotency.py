"""Idempotency-Key: the same key gets the stored answer and has no second effect."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def _cluster(client: TestClient, raw: dict[str, Any], name: str = "c") -> None:
    answer = client.post("/v1/clusters", json={"name": name, "instance": raw})
    assert answer.status_code == 201, answer.text


def test_same_key_same_answer_no_second_effect(
    client: TestClient, hetero_raw: dict[str, Any]
) -> None:
    _cluster(client, hetero_raw)
    job = {"id": "j1", "gpus": 1, "duration_s": 60}
    first = client.post("/v1/clusters/c/jobs", json={"job": job}, headers={"Idempotency-Key": "a"})
    again = client.post("/v1/clusters/c/jobs", json={"job": job}, headers={"Idempotency-Key": "a"})
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert client.get("/v1/clusters/c").json()["seq"] == 1
    # Without the key the same request is a new one: the job is already known.
    assert client.post("/v1/clusters/c/jobs", json={"job": job}).status_code == 409


def test_same_key_other_request_is_refused(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    _cluster(client, hetero_raw)
    key = {"Idempotency-Key": "b"}
    job = {"id": "j1", "gpus": 1, "duration_s": 60}
    assert client.post("/v1/clusters/c/jobs", json={"job": job}, headers=key).status_code == 201
    other = client.post("/v1/clusters/c/jobs", json={"job": {**job, "id": "j2"}}, headers=key)
    assert other.status_code == 422 and "different request" in other.json()["detail"]
    finish = client.post("/v1/clusters/c/jobs/j1/finish", headers=key)
    assert finish.status_code == 422
    assert client.get("/v1/clusters/c/jobs/j1").json()["state"] == "queued"


def test_decide_and_create_are_idempotent(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    key = {"Idempotency-Key": "create-c"}
    body = {"name": "c", "instance": hetero_raw}
    first = client.post("/v1/clusters", json=body, headers=key)
    again = client.post("/v1/clusters", json=body, headers=key)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    round_key = {"Idempotency-Key": "round-10"}
    decided = client.post("/v1/clusters/c/decide", json={"now": 10}, headers=round_key)
    assert decided.status_code == 200
    seq = client.get("/v1/clusters/c").json()["seq"]
    repeat = client.post("/v1/clusters/c/decide", json={"now": 10}, headers=round_key)
    assert repeat.json() == decided.json() and repeat.headers["Idempotent-Replayed"] == "true"
    assert client.get("/v1/clusters/c").json()["seq"] == seq
    deleted = client.delete("/v1/clusters/c", headers={"Idempotency-Key": "del"})
    assert deleted.status_code == 200
    assert client.delete("/v1/clusters/c", headers={"Idempotency-Key": "del"}).status_code == 200
    assert client.delete("/v1/clusters/c").status_code == 404


def test_a_failed_request_stores_nothing(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    key = {"Idempotency-Key": "early"}
    job = {"id": "j1", "gpus": 1, "duration_s": 60}
    assert client.post("/v1/clusters/c/jobs", json={"job": job}, headers=key).status_code == 404
    _cluster(client, hetero_raw)
    assert client.post("/v1/clusters/c/jobs", json={"job": job}, headers=key).status_code == 201


def test_bad_keys_are_refused(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    _cluster(client, hetero_raw)
    job = {"id": "j1", "gpus": 1, "duration_s": 60}
    long_key = {"Idempotency-Key": "k" * 300}
    assert (
        client.post("/v1/clusters/c/jobs", json={"job": job}, headers=long_key).status_code == 422
    )
    empty = {"Idempotency-Key": ""}
    assert client.post("/v1/clusters/c/jobs", json={"job": job}, headers=empty).status_code == 400
