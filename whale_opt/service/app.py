"""The FastAPI application: routers, error handlers, limits, metrics, OpenAPI.

``create_app(config)`` wires the parts; uvicorn serves it (``whale-opt
serve``). The OpenAPI document (``/openapi.json``) embeds the published
instance@1 and decision@1 schemas and names each route's role under
``x-required-role``.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, Response

import whale_opt
from whale_opt.service import clusters, extender, rounds, stateless
from whale_opt.service.auth import Role
from whale_opt.service.config import ServiceConfig
from whale_opt.service.core import Service
from whale_opt.service.errors import HANDLERS
from whale_opt.service.limits import ASGIApp, BodyLimit, Message, Receive, Scope, Send
from whale_opt.service.metrics import CONTENT_TYPE, Metrics
from whale_opt.service.models import Health, format_schemas
from whale_opt.service.routing import guarded, service_of

DESCRIPTION = """Placement engine for GPU clusters, as a service.

Stateless rounds (`/v1/solve`, `/v1/check`, `/v1/explain`, `/v1/whatif`), the
round API of named clusters (`/v1/clusters/...`: durable, idempotent with an
`Idempotency-Key` header), the Kubernetes scheduler extender
(`/extender/v1/...`), `/metrics` and `/healthz`. With tokens configured every
route needs `Authorization: Bearer TOKEN`; `x-required-role` names the role.
"""


class RequestMetrics:
    """Count and time every request by route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(time.perf_counter() - started)


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes
        )
        document.setdefault("components", {}).setdefault("schemas", {}).update(format_schemas())
        if service_of_app(app).auth.enabled:
            document["components"]["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}
            }
            document["security"] = [{"bearer": []}]
        app.openapi_schema = document
    return app.openapi_schema


def _method_table(app: FastAPI) -> Callable[[str], list[str]]:
    """``path -> methods`` of every route whose template matches it (for 405's Allow)."""
    table: list[tuple[re.Pattern[str], set[str]]] | None = None

    def allowed(path: str) -> list[str]:
        nonlocal table
        if table is None:
            table = []
            for template, operations in _openapi(app)["paths"].items():
                pattern = re.sub(r"\\{\w+\\}", "[^/]+", re.escape(template))
                table.append((re.compile(f"^{pattern}$"), {m.upper() for m in operations}))
        found = set().union(*(methods for regex, methods in table if regex.match(path)))
        return sorted(found)

    return allowed


def service_of_app(app: FastAPI) -> Service:
    """The application's :class:`Service`."""
    found: Service = app.state.service
    return found


def _ops_routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["operations"], summary="Liveness", **guarded(Role.READ))
    async def healthz(request: Request) -> Health:
        """Up, with the number of clusters and the pool's load."""
        service = service_of(request)
        return Health(
            status="ok",
            clusters=len(service.clusters),
            pool_in_flight=service.pool.in_flight,
            pool_capacity=service.pool.capacity,
        )

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics (text exposition format)",
        response_class=Response,
        **guarded(
            Role.READ,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        ),
    )
    async def metrics(request: Request) -> Response:
        """Round latency and gap, queue lengths, decisions by action, HTTP and pool counts."""
        service = service_of(request)
        text = service.metrics.render(
            service.clusters.values(), service.pool.in_flight, service.pool.capacity
        )
        return Response(text, media_type=CONTENT_TYPE)

    @app.get("/openapi.json", include_in_schema=False, **guarded(Role.READ))
    async def openapi(request: Request) -> JSONResponse:
        """The OpenAPI document (the published formats embedded)."""
        return JSONResponse(_openapi(request.app))

    @app.get("/docs", include_in_schema=False, **guarded(Role.READ))
    async def docs(request: Request) -> HTMLResponse:
        """Swagger UI over the document."""
        return get_swagger_ui_html(openapi_url="/openapi.json", title="whale-opt API")


def create_app(config: ServiceConfig) -> FastAPI:
    """The application serving ``config`` (state is loaded when it starts)."""
    service = Service(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            yield
        finally:
            service.stop()

    app = FastAPI(
        title="whale-opt",
        version=whale_opt.__version__,
        description=DESCRIPTION,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.allowed_methods = _method_table(app)
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    _ops_routes(app)
    for module in (stateless, clusters, rounds, extender):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=service.metrics)
    return app
