"""The endpoints: answers, and errors that name the field and the value (never a 500)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from whale_opt.check import check
from whale_opt.io import decision_from_dict, instance_from_dict
from whale_opt.service.storage import Store


def test_solve_answers_a_decision_the_checker_accepts(
    client: TestClient, hetero_raw: dict[str, Any]
) -> None:
    answer = client.post("/v1/solve", json=hetero_raw, params={"time_limit_s": 2})
    assert answer.status_code == 200, answer.text
    decision = decision_from_dict(answer.json())
    assert check(instance_from_dict(hetero_raw), decision) == []
    verdict = client.post("/v1/check", json={"instance": hetero_raw, "decision": answer.json()})
    assert verdict.json() == {"ok": True, "violations": []}


def test_checker_names_violations(client: TestClient, small_raw: dict[str, Any]) -> None:
    decision = client.post("/v1/solve", json=small_raw).json()
    started = next(job for job in decision["jobs"] if job["action"] == "start")
    started["gpus"] = [*started["gpus"], started["gpus"][0]]  # one GPU twice
    verdict = client.post("/v1/check", json={"instance": small_raw, "decision": decision})
    assert verdict.status_code == 200 and verdict.json()["ok"] is False
    assert any(v["job"] == started["id"] for v in verdict.json()["violations"])


def test_bad_input_is_422_with_path_and_value(
    client: TestClient, small_raw: dict[str, Any]
) -> None:
    bad = copy.deepcopy(small_raw)
    bad["queue"][0]["gpus"] = -1
    answer = client.post("/v1/solve", json=bad)
    assert answer.status_code == 422
    error = answer.json()["errors"][0]
    assert error["path"] == "queue[0].gpus" and "got -1" in error["message"]
    assert error["value"] == -1  # as the document promises, beside the message
    typo = copy.deepcopy(small_raw)
    typo["queue"][0]["gpu_types"] = ["H100-80X"]
    answer = client.post("/v1/check", json={"instance": typo, "decision": {}})
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["path"] == "instance.queue[0].gpu_types[0]"
    assert answer.json()["errors"][0]["value"] == "H100-80X"
    assert "H100-80X" in answer.json()["detail"]
    answer = client.post("/v1/solve", json=small_raw, params={"solver": "magic"})
    assert answer.status_code == 422 and answer.json()["errors"][0]["value"] == "magic"
    answer = client.post(
        "/v1/solve", content=b'{"name": ', headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400 and "malformed JSON" in answer.json()["detail"]
    answer = client.post("/v1/clusters", json={"name": "bad name!", "instance": small_raw})
    assert answer.status_code == 422 and answer.json()["errors"][0]["path"] == "body.name"


def test_bodies_are_read_as_strictly_as_files(
    client: TestClient, small_raw: dict[str, Any]
) -> None:
    """What a file may not hold, a body may not either: before, a job of 10**30 s
    was taken and every later round of its cluster answered 500, a NaN was a 500,
    and of a key given twice the last was silently used."""
    created = client.post("/v1/clusters", json={"name": "c", "instance": small_raw})
    assert created.status_code == 201, created.text
    headers = {"content-type": "application/json"}
    cases = [
        (
            "/v1/clusters/c/jobs",
            '{"job": {"id": "x", "gpus": 1, "duration_s": 1' + "0" * 30 + "}}",
            "job.duration_s",
            "integer out of the 64-bit range",
        ),
        ("/v1/clusters/c/decide", '{"now": NaN}', "now", "NaN and Infinity are not JSON"),
        ("/v1/clusters/c/decide", '{"now": 1e400}', "now", "too large for a 64-bit float"),
        ("/v1/clusters/c/decide", '{"now": 1, "now": 2}', "now", "duplicate key"),
        (
            "/v1/check",
            '{"instance": ' + "[" * 70 + "]" * 70 + "}",
            "instance" + "[0]" * 63,
            "nested deeper than 64 levels",
        ),
    ]
    for url, body, path, message in cases:
        answer = client.post(url, content=body.encode(), headers=headers)
        assert answer.status_code == 422, (url, body[:40], answer.text)
        (error,) = answer.json()["errors"]
        assert error["path"] == path and message in error["message"], answer.text
    assert client.get("/v1/clusters/c").json()["queued"] == len(small_raw["queue"])
    assert client.post("/v1/clusters/c/decide", json={"now": 1}).status_code == 200


def test_body_too_large_is_413(make_client: Any, small_raw: dict[str, Any]) -> None:
    with make_client(max_body_bytes=2048) as small_client:
        padded = {**small_raw, "name": "x" * 4096}
        assert small_client.post("/v1/solve", json=padded).status_code == 413
        assert small_client.post("/v1/check", json={"instance": {}}).status_code == 422


def test_explain_and_whatif(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    explained = client.post("/v1/explain", json={"instance": hetero_raw})
    assert explained.status_code == 200, explained.text
    assert explained.json() and all(item["reasons"] for item in explained.json())
    answer = client.post("/v1/explain", json={"instance": hetero_raw, "jobs": ["nope"]})
    assert answer.status_code == 404 and answer.json()["errors"][0]["path"] == "jobs[0]"
    node = hetero_raw["nodes"][0]["id"]
    change = {"kind": "fail-node", "target": node}
    diff = client.post("/v1/whatif", json={"instance": hetero_raw, "change": change})
    assert diff.status_code == 200 and diff.json()["change"]["target"] == node
    change = {"kind": "fail-node", "target": "no-such-node"}
    answer = client.post("/v1/whatif", json={"instance": hetero_raw, "change": change})
    assert answer.status_code == 422 and answer.json()["errors"][0]["value"] == "no-such-node"
    job = {"id": "added", "gpus": 1, "duration_s": 60}
    change = {"kind": "add-jobs", "jobs": [job]}
    diff = client.post("/v1/whatif", json={"instance": hetero_raw, "change": change})
    assert diff.status_code == 200, diff.text
    assert any(item["id"] == "added" for item in diff.json()["jobs"])


def test_explain_and_whatif_solve_under_the_servers_cap(
    make_client: Any, small_raw: dict[str, Any], monkeypatch: Any
) -> None:
    """Before, both solved with the library's 10 s default, whatever the server's cap."""
    import importlib

    modules = [
        importlib.import_module(f"whale_opt.explain.{m}") for m in ("counterfactuals", "whatif")
    ]
    limits: list[float] = []

    def recording(solve: Any) -> Any:
        def solve_and_record(instance: Any, solver: str, options: Any = None) -> Any:
            limits.append(options.time_limit_s)
            return solve(instance, solver, options)

        return solve_and_record

    for module in modules:
        monkeypatch.setattr(module, "solve", recording(module.solve))
    with make_client(max_time_limit_s=0.25) as capped:
        body = {"instance": small_raw, "solver": "wspt", "counterfactuals": True}
        assert capped.post("/v1/explain", json=body).status_code == 200
        change = {"kind": "fail-node", "target": small_raw["nodes"][0]["id"]}
        answer = capped.post("/v1/whatif", json={"instance": small_raw, "change": change})
        assert answer.status_code == 200, answer.text
        assert len(limits) >= 3 and set(limits) == {0.25}
        change = {"kind": "preempt", "value": -1}  # was a 500 (an int is not a list)
        answer = capped.post("/v1/whatif", json={"instance": small_raw, "change": change})
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["path"] == "change.value"


def test_schemas_health_and_metrics(client: TestClient, small_raw: dict[str, Any]) -> None:
    assert client.get("/v1/schemas/instance").json()["title"].startswith("whale_opt instance")
    assert client.get("/v1/schemas/other").status_code == 422
    assert client.get("/healthz").json()["status"] == "ok"
    client.post("/v1/solve", json=small_raw)
    text = client.get("/metrics").text
    for name in (
        "whale_opt_round_seconds_bucket",
        "whale_opt_round_gap_bucket",
        'whale_opt_decisions_total{action="start",endpoint="solve"}',
        "whale_opt_http_requests_total",
    ):
        assert name in text
    document = client.get("/openapi.json").json()
    assert {"InstanceV1", "DecisionV1", "QueueItemV1"} <= set(document["components"]["schemas"])


def test_round_api_over_http(client: TestClient, hetero_raw: dict[str, Any]) -> None:
    created = client.post("/v1/clusters", json={"name": "c", "instance": hetero_raw})
    assert created.status_code == 201 and created.json()["queued"] == 20
    assert (
        client.post("/v1/clusters", json={"name": "c", "instance": hetero_raw}).status_code == 409
    )
    job = {"id": "mine", "gpus": 2, "duration_s": 600, "submitted_at": 5}
    assert client.post("/v1/clusters/c/jobs", json={"job": job}).status_code == 201
    assert client.post("/v1/clusters/c/jobs", json={"job": job}).status_code == 409
    bad = client.post("/v1/clusters/c/jobs", json={"job": {**job, "id": "x", "gpus": -1}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "job.gpus"
    assert client.post("/v1/clusters/nope/jobs", json={"job": job}).status_code == 404

    proposal = client.post("/v1/clusters/c/propose", json={"now": 10})
    assert proposal.status_code == 200
    assert client.get("/v1/clusters/c").json()["decided_at"] is None  # propose changes nothing
    applied = client.post("/v1/clusters/c/apply", json={"now": 10, "decision": proposal.json()})
    assert applied.status_code == 200, applied.text
    state = client.get("/v1/clusters/c").json()
    started = [j["id"] for j in proposal.json()["jobs"] if j["action"] == "start"]
    assert started and {j["id"] for j in state["running_jobs"]} >= set(started)
    assert (
        client.post(
            "/v1/clusters/c/apply", json={"now": 10, "decision": proposal.json()}
        ).status_code
        == 422
    )
    assert client.post("/v1/clusters/c/decide", json={"now": 5}).status_code == 409  # clock

    running = client.get(f"/v1/clusters/c/jobs/{started[0]}").json()
    assert running["state"] == "running" and running["gpus"]
    point = client.post(f"/v1/clusters/c/jobs/{started[0]}/checkpointed", json={"now": 50})
    assert point.status_code == 200
    node = running["nodes"][0]
    down = client.post(f"/v1/clusters/c/nodes/{node}/down", json={"now": 60})
    assert down.status_code == 200 and started[0] in down.json()["requeued"]
    assert client.get(f"/v1/clusters/c/jobs/{started[0]}").json()["state"] == "queued"
    assert client.post("/v1/clusters/c/nodes/ghost/down", json={"now": 60}).status_code == 404
    drained = client.post(f"/v1/clusters/c/nodes/{node}/drain", json={"draining": True})
    assert drained.status_code == 200
    decided = client.post("/v1/clusters/c/decide", json={"now": 70, "time_limit_s": 1})
    assert decided.status_code == 200
    hints = client.get("/v1/clusters/c/prewarm", params={"lookahead_s": 86400}).json()
    planned = {j["id"] for j in decided.json()["jobs"] if j["action"] == "planned"}
    assert {hint["id"] for hint in hints["jobs"]} <= planned and hints["decided_at"] == 70
    assert all(hint["starts_in_s"] <= 86400 and hint["nodes"] for hint in hints["jobs"])
    assert node not in {n for hint in hints["jobs"] for n in hint["nodes"]}
    assert client.post("/v1/clusters/c/jobs/mine/finish").status_code == 200
    assert client.get("/v1/clusters/c/jobs/mine").status_code == 404
    assert client.get("/v1/clusters").json()["clusters"][0]["name"] == "c"
    assert client.delete("/v1/clusters/c").status_code == 200
    assert client.get("/v1/clusters/c").status_code == 404


def _cluster_at(client: TestClient, raw: dict[str, Any], now: int) -> str:
    """Cluster ``c`` of ``raw``, its clock moved to ``now`` by a node event; that node."""
    assert client.post("/v1/clusters", json={"name": "c", "instance": raw}).status_code == 201
    node: str = raw["nodes"][0]["id"]
    moved = client.post(f"/v1/clusters/c/nodes/{node}/down", json={"now": now, "down": False})
    assert moved.status_code == 200, moved.text
    assert client.get("/v1/clusters/c").json()["clock"] == now
    return node


def test_a_job_submitted_without_submitted_at_is_submitted_at_the_clock(
    make_client: Any, tmp_path: Path, small_raw: dict[str, Any]
) -> None:
    """Before, it was taken as submitted at 0: on a clock at 10**6 s it had waited
    10**6 s at once (its aged weight inflated, a wait ceiling tripped). The stamp
    is the clock when the submission is applied; a retry and a restart keep it."""
    now = 1_000_000
    key = {"Idempotency-Key": "late"}
    job = {"id": "late", "gpus": 1, "duration_s": 600}
    with make_client() as client:
        node = _cluster_at(client, small_raw, now)
        answer = client.post("/v1/clusters/c/jobs", json={"job": job}, headers=key)
        assert answer.status_code == 201, answer.text
        assert client.get("/v1/clusters/c/jobs/late").json()["submitted_at"] == now
        assert answer.json()["submitted_at"] == now
        later = client.post(
            f"/v1/clusters/c/nodes/{node}/down", json={"now": now + 500, "down": False}
        )
        assert later.status_code == 200
        again = client.post("/v1/clusters/c/jobs", json={"job": job}, headers=key)
        assert again.headers["Idempotent-Replayed"] == "true" and again.json() == answer.json()
        assert client.get("/v1/clusters/c/jobs/late").json()["submitted_at"] == now
    with make_client() as restarted:  # the same database: the log is replayed
        assert restarted.get("/v1/clusters/c").json()["clock"] == now + 500
        assert restarted.get("/v1/clusters/c/jobs/late").json()["submitted_at"] == now
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    stored = store.load("c")
    store.close()
    assert stored is not None
    submits = [payload for _, kind, payload in stored.events if kind == "submit"]
    assert [payload["job"]["submitted_at"] for payload in submits] == [now]


def test_an_explicit_submitted_at_of_0_is_kept(
    client: TestClient, small_raw: dict[str, Any]
) -> None:
    now = 1_000_000
    _cluster_at(client, small_raw, now)
    job = {"id": "old", "gpus": 1, "duration_s": 600, "submitted_at": 0}
    answer = client.post("/v1/clusters/c/jobs", json={"job": job})
    assert answer.status_code == 201, answer.text
    assert client.get("/v1/clusters/c/jobs/old").json()["submitted_at"] == 0
    assert answer.json()["submitted_at"] == 0


def test_a_cluster_on_a_unix_clock_takes_jobs_and_decides(
    client: TestClient, small_raw: dict[str, Any]
) -> None:
    """Queue items are checked as instance@1 items, but a cluster's times are its
    clock's (Unix seconds here), not relative to a file's ``now``."""
    now = 1_700_000_000
    raw = {**small_raw, "queue": [], "running": []}
    assert client.post("/v1/clusters", json={"name": "u", "instance": raw}).status_code == 201
    assert client.post("/v1/clusters/u/decide", json={"now": now}).status_code == 200
    given = {"id": "given", "gpus": 1, "duration_s": 600, "submitted_at": now - 30}
    stamped = {"id": "stamped", "gpus": 1, "duration_s": 600}
    for job in (given, stamped):
        answer = client.post("/v1/clusters/u/jobs", json={"job": job})
        assert answer.status_code == 201, answer.text
    decided = client.post("/v1/clusters/u/decide", json={"now": now + 60})
    assert decided.status_code == 200, decided.text
    started = {item["id"] for item in decided.json()["jobs"] if item["action"] == "start"}
    assert started == {"given", "stamped"}


def test_whatif_add_jobs_error_names_the_job_in_change_jobs(
    client: TestClient, small_raw: dict[str, Any]
) -> None:
    """Before: change.queue[6].id, a place in the merged queue the caller never sent."""
    taken = small_raw["queue"][0]["id"]
    change = {"kind": "add-jobs", "jobs": [{"id": taken, "gpus": 1, "duration_s": 60}]}
    answer = client.post("/v1/whatif", json={"instance": small_raw, "change": change})
    assert answer.status_code == 422
    error = answer.json()["errors"][0]
    assert error["path"] == "change.jobs[0].id" and error["value"] == taken


def test_a_proposal_applies_though_jobs_arrived_after_it(
    client: TestClient, hetero_raw: dict[str, Any]
) -> None:
    # Propose, review, apply: a job submitted in between has no decision in the
    # proposal. It was a 422 ("j2: has no decision", then the objective); it now
    # stays queued for the next round.
    assert (
        client.post("/v1/clusters", json={"name": "c", "instance": hetero_raw}).status_code == 201
    )
    proposal = client.post("/v1/clusters/c/propose", json={"now": 10}).json()
    job = {"id": "late", "gpus": 1, "duration_s": 600}
    assert client.post("/v1/clusters/c/jobs", json={"job": job}).status_code == 201
    applied = client.post("/v1/clusters/c/apply", json={"now": 10, "decision": proposal})
    assert applied.status_code == 200, applied.text
    assert client.get("/v1/clusters/c/jobs/late").json()["state"] == "queued"
    started = [j["id"] for j in proposal["jobs"] if j["action"] == "start"]
    assert started and client.get(f"/v1/clusters/c/jobs/{started[0]}").json()["state"] == "running"


def test_a_checkpoint_before_the_clock_is_refused_and_one_after_moves_it(
    client: TestClient, hetero_raw: dict[str, Any]
) -> None:
    assert (
        client.post("/v1/clusters", json={"name": "c", "instance": hetero_raw}).status_code == 201
    )
    decided = client.post("/v1/clusters/c/decide", json={"now": 20, "time_limit_s": 1}).json()
    job = next(j["id"] for j in decided["jobs"] if j["action"] == "start")
    point = f"/v1/clusters/c/jobs/{job}/checkpointed"
    assert client.post(point, json={"now": 25}).status_code == 200
    back = client.post(point, json={"now": 22})  # was accepted: the checkpoint went back
    assert back.status_code == 409 and "clock" in back.json()["detail"]
    assert client.post(point, json={"now": 500}).status_code == 200
    # The clock moved with it: a node reported down before that is refused.
    node = client.get(f"/v1/clusters/c/jobs/{job}").json()["nodes"][0]
    assert client.post(f"/v1/clusters/c/nodes/{node}/down", json={"now": 400}).status_code == 409


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"kind": "quota", "target": "cv", "value": "x"}, "change.value"),
        ({"kind": "preempt", "value": ["nope"]}, "change.value[0]"),
    ],
)
def test_a_whatif_value_that_names_nothing_is_a_422_naming_it(
    client: TestClient, small_raw: dict[str, Any], change: dict[str, Any], path: str
) -> None:
    # The quota was int()'s own message under "change"; preempting an unknown job
    # was a 200 of no change.
    answer = client.post("/v1/whatif", json={"instance": small_raw, "change": change})
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["path"] == path
