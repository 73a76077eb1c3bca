"""What every route declares: the role it needs and the errors it may answer."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from whale_opt.service.auth import Principal, Role, require
from whale_opt.service.core import Service
from whale_opt.service.models import Problem

_ERRORS = {
    400: "Malformed request (not JSON, or a bad header).",
    401: "No or an unknown bearer token (only when tokens are configured).",
    403: "The token's role is below the route's.",
    404: "Unknown cluster, job or node.",
    409: "Conflicts with the cluster's state (retry after reading it).",
    413: "Request body too large.",
    422: "A field breaks the format or the data model: its path and value are named.",
    503: "The solvers are saturated or the database is unavailable: retry after Retry-After.",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": text} for status, text in _ERRORS.items()
}
ROLE_EXTENSION = "x-required-role"


def guarded(role: Role, **extra: Any) -> dict[str, Any]:
    """Route keywords: the auth dependency, the role in the OpenAPI document, the errors."""
    responses = {**ERROR_RESPONSES, **extra.pop("responses", {})}
    return {
        "dependencies": [Depends(require(role))],
        "openapi_extra": {ROLE_EXTENSION: role.label, **extra.pop("openapi_extra", {})},
        "responses": responses,
        **extra,
    }


def service_of(request: Request) -> Service:
    """The application's :class:`Service`."""
    found: Service = request.app.state.service
    return found


def principal_of(request: Request) -> Principal:
    """Who called (set by the auth dependency)."""
    found: Principal = request.state.principal
    return found


def request_id(request: Request, body: Any) -> str:
    """What a request asked, for its idempotency fingerprint."""
    dumped = body.model_dump_json() if hasattr(body, "model_dump_json") else str(body)
    return f"{request.method} {request.url.path}?{request.url.query} {dumped}"


def decision_response(description: str) -> dict[int | str, dict[str, Any]]:
    """A 200 whose body is decision@1."""
    return {
        200: {
            "description": description,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/DecisionV1"}}
            },
        }
    }
