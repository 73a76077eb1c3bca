"""Bearer tokens: every route walked with no token, a wrong one, and each role."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from whale_opt.service.auth import Role, parse_tokens
from whale_opt.service.routing import ROLE_EXTENSION

TOKENS = {
    Role.READ: "read-token-0123456789",
    Role.SUBMIT: "submit-token-0123456789",
    Role.ADMIN: "admin-token-0123456789",
}
PATH_VALUES = {"name": "c", "job_id": "j", "node_id": "n", "kind": "instance"}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    admin_hash = hashlib.sha256(TOKENS[Role.ADMIN].encode()).hexdigest()
    path.write_text(
        "# role token name\n"
        f"read   {TOKENS[Role.READ]}    grafana\n"
        f"submit {TOKENS[Role.SUBMIT]}  ci\n"
        f"admin  sha256:{admin_hash}    ops  # stored hashed\n"
    )
    return path


def _routes(client: TestClient) -> list[tuple[str, str, Role]]:
    """Every operation of the OpenAPI document, and the routes left out of it."""
    headers = {"Authorization": f"Bearer {TOKENS[Role.READ]}"}
    document = client.get("/openapi.json", headers=headers).json()
    found = []
    for template, operations in document["paths"].items():
        path = re.sub(r"{(\w+)}", lambda m: PATH_VALUES[m.group(1)], template)
        for method, operation in operations.items():
            assert ROLE_EXTENSION in operation, f"{method} {template} declares no role"
            found.append((method.upper(), path, Role[operation[ROLE_EXTENSION].upper()]))
    for route in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(route, APIRoute) and not route.include_in_schema:
            role = (route.openapi_extra or {}).get(ROLE_EXTENSION)
            assert role is not None, f"{route.path} declares no role"
            found += [(m, route.path, Role[role.upper()]) for m in route.methods - {"HEAD"}]
    return found


def test_every_route_checks_the_token_and_the_role(make_client: Any, tokens_file: Path) -> None:
    with make_client(tokens_file=tokens_file) as client:
        routes = _routes(client)
        assert len(routes) >= 20
        for method, path, needed in routes:
            body = {} if method in ("POST", "PUT", "PATCH") else None

            def call(
                token: str | None, method: str = method, path: str = path, body: Any = body
            ) -> Any:
                headers = {} if token is None else {"Authorization": f"Bearer {token}"}
                return client.request(method, path, json=body, headers=headers)

            where = f"{method} {path}"
            missing = call(None)
            assert missing.status_code == 401, where
            assert missing.headers["WWW-Authenticate"].startswith("Bearer"), where
            assert call("not-a-token-at-all").status_code == 401, where
            for role, token in TOKENS.items():
                status = call(token).status_code
                if role < needed:
                    assert status == 403, f"{where} as {role.label}: {status}"
                else:
                    assert status not in (401, 403, 500), f"{where} as {role.label}: {status}"


def test_roles_split_reading_submitting_and_changing(
    make_client: Any, tokens_file: Path, small_raw: dict[str, Any]
) -> None:
    def bearer(role: Role) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[role]}"}

    with make_client(tokens_file=tokens_file) as client:
        body = {"name": "c", "instance": small_raw}
        assert (
            client.post("/v1/clusters", json=body, headers=bearer(Role.SUBMIT)).status_code == 403
        )
        assert client.post("/v1/clusters", json=body, headers=bearer(Role.ADMIN)).status_code == 201
        job = {"job": {"id": "j", "gpus": 1, "duration_s": 60}}
        read = client.post("/v1/clusters/c/jobs", json=job, headers=bearer(Role.READ))
        assert read.status_code == 403 and "needs submit" in read.json()["detail"]
        key = {"Idempotency-Key": "same"}
        submitted = client.post(
            "/v1/clusters/c/jobs", json=job, headers={**bearer(Role.SUBMIT), **key}
        )
        assert submitted.status_code == 201
        # Keys are per principal: the admin's "same" is another request.
        other = {"job": {"id": "k", "gpus": 1, "duration_s": 60}}
        again = client.post(
            "/v1/clusters/c/jobs", json=other, headers={**bearer(Role.ADMIN), **key}
        )
        assert again.status_code == 201 and again.json()["job"] == "k"
        assert client.get("/v1/clusters/c", headers=bearer(Role.READ)).json()["queued"] >= 2
        document = client.get("/openapi.json", headers=bearer(Role.READ)).json()
        assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_tokens_file_errors_name_the_line() -> None:
    with pytest.raises(ValueError, match=":2: unknown role"):
        parse_tokens("read long-enough-token-1\nroot long-enough-token-2\n")
    with pytest.raises(ValueError, match="shorter than 16"):
        parse_tokens("admin short\n")
    with pytest.raises(ValueError, match="no token"):
        parse_tokens("# nothing\n")
    with pytest.raises(ValueError, match="given twice"):
        parse_tokens("read long-enough-token-1\nadmin long-enough-token-1\n")
    with pytest.raises(ValueError, match="64 hex"):
        parse_tokens("admin sha256:abc\n")


def test_open_extender_lets_kube_scheduler_in_and_nobody_else(
    make_client: Any, tokens_file: Path
) -> None:
    with make_client(tokens_file=tokens_file, open_extender=True) as client:
        payload = {"Pod": {"metadata": {"name": "p"}}, "Nodes": None, "NodeNames": ["a"]}
        answer = client.post("/extender/v1/filter", json=payload)
        assert answer.status_code == 200 and answer.json()["NodeNames"] == ["a"]
        assert client.post("/extender/v1/clusters/x/prioritize", json=payload).status_code == 200
        assert client.get("/v1/clusters").status_code == 401
        assert client.get("/healthz").status_code == 401
