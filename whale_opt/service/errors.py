"""Errors as answers: every failure is a JSON problem naming the field and the value.

Bad input is a 4xx, never a 500: 400 for a body that is not JSON, 422 for a
field that breaks the schema or the data model (its path, e.g.
``queue[0].gpu_types[1]``, and the value), 404 for an unknown cluster, job or
node, 409 for a request that conflicts with the state, 413 for a body too
large, 503 (with ``Retry-After``) when the solvers are saturated.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from whale_opt.io import InputError
from whale_opt.problem_data import FieldError
from whale_opt.service.work import WorkError

log = logging.getLogger("whale_opt")


class ApiError(Exception):
    """An answer other than success: status, one-line detail, per-field errors."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        """The JSON problem document of this error."""
        body: dict[str, Any] = {"detail": self.detail}
        if self.errors:
            body["errors"] = self.errors
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def _plain(value: Any) -> Any:
    """``value`` if JSON can carry it, else its repr (bytes, sets, ...)."""
    try:
        json.dumps(value, allow_nan=False)  # as the answer is rendered
    except (TypeError, ValueError):
        return repr(value)
    return value


def invalid(path: str, message: str, value: Any = None, where: str = "") -> ApiError:
    """A 422 for one bad field (``where`` prefixes the path, e.g. ``instance``)."""
    full = f"{where}.{path}" if where and path and not path.startswith("[") else where + path
    entry: dict[str, Any] = {"path": full or "(body)", "message": message}
    if value is not None:
        entry["value"] = _plain(value)
    return ApiError(422, f"{entry['path']}: {message}", [entry])


def from_input_error(exc: InputError, where: str = "") -> ApiError:
    """A 422 naming the JSON path and value an :class:`InputError` found."""
    path = "" if exc.path == "(top level)" else exc.path
    return invalid(path, exc.message, exc.value, where=where)


def from_field_error(exc: FieldError, where: str = "") -> ApiError:
    """A 422 naming the field and value a :class:`FieldError` found."""
    return invalid(exc.path, exc.message, exc.value, where=where)


def not_found(what: str, name: str) -> ApiError:
    """A 404 for an unknown cluster, job or node."""
    return ApiError(404, f"no {what} {name!r}")


def saturated(retry_after_s: int = 1, why: str = "all solver workers are busy") -> ApiError:
    """A 503 that tells the client when to come back."""
    return ApiError(503, f"{why}; retry later", headers={"Retry-After": str(retry_after_s)})


def _loc_path(loc: tuple[Any, ...] | list[Any]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


async def _validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = []
    status = 422
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            status = 400
            reason = (error.get("ctx") or {}).get("error", "")
            errors.append({"path": "(body)", "message": f"malformed JSON: {reason}".strip()})
            continue
        entry = {"path": _loc_path(error.get("loc", ())), "message": error.get("msg", "invalid")}
        if "input" in error and error.get("type") != "missing":
            entry["value"] = _plain(error["input"])
        errors.append(entry)
    detail = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:3]) or "invalid request"
    return ApiError(status, detail, errors).response()


async def _work_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, WorkError)
    entry: dict[str, Any] = {"path": exc.path or "(body)", "message": exc.message}
    if exc.value is not None:
        entry["value"] = _plain(exc.value)
    return ApiError(exc.status, f"{entry['path']}: {exc.message}", [entry]).response()


async def _api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    allowed = getattr(request.app.state, "allowed_methods", None)
    if exc.status_code == 405 and allowed is not None:
        # Starlette names only the first route that matched the path; list them all.
        headers["Allow"] = ", ".join(allowed(request.url.path))
    return ApiError(exc.status_code, str(exc.detail), headers=headers).response()


async def _unexpected_handler(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return ApiError(500, f"internal error: {type(exc).__name__}").response()


HANDLERS = {
    RequestValidationError: _validation_handler,
    ApiError: _api_error_handler,
    WorkError: _work_error_handler,
    StarletteHTTPException: _http_handler,
    Exception: _unexpected_handler,
}
