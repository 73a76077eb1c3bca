"""Stateless endpoints: files in, answers out (solve, check, explain, what-if, schemas).

Each request's work runs in the solver pool (reading and validating the
instance too), so the event loop only moves bytes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse

from whale_opt.io import schema
from whale_opt.service import work
from whale_opt.service.auth import Role
from whale_opt.service.models import (
    CheckRequest,
    CheckResult,
    ExplainRequest,
    InstanceBody,
    WhatIfRequest,
)
from whale_opt.service.routing import decision_response, guarded, service_of

router = APIRouter(tags=["rounds (stateless)"])


async def run(request: Request, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in the solver pool (a :class:`~work.WorkError` it raises is a 4xx)."""
    service = service_of(request)
    return await service.pool.run(service.config.request_timeout_s, fn, *args)


@router.post(
    "/v1/solve",
    summary="Decide one round of an instance@1 body; answer decision@1",
    response_class=JSONResponse,
    **guarded(Role.SUBMIT, responses=decision_response("The round's decision (decision@1).")),
)
async def solve_endpoint(
    request: Request,
    instance: Annotated[InstanceBody, Body()],
    solver: Annotated[str, Query(max_length=64, description="Policy or solver name.")] = "cpsat",
    time_limit_s: Annotated[
        float | None, Query(gt=0, le=3600, description="Capped by the server.")
    ] = None,
    preset: Annotated[str | None, Query(max_length=64, description="CP-SAT preset.")] = None,
) -> JSONResponse:
    """Solve the instance; the time limit is the query's, else the file's, capped."""
    service = service_of(request)
    cap = service.config.max_time_limit_s
    decision = await run(request, work.solve_file, instance, solver, preset, time_limit_s, cap)
    service.metrics.round_seconds.labels("solve").observe(decision["wall_s"])
    service.metrics.round_gap.labels("solve").observe(decision["gap"])
    for item in decision["jobs"]:
        service.metrics.decisions.labels("solve", item["action"]).inc()
    return JSONResponse(decision)


@router.post(
    "/v1/check",
    summary="Verify a decision@1 against an instance@1 with the public checker",
    **guarded(Role.READ),
)
async def check_endpoint(request: Request, body: CheckRequest) -> CheckResult:
    """Every broken rule, named (ok when none)."""
    verdict = await run(request, work.check_files, body.instance, body.decision)
    return CheckResult.model_validate(verdict)


@router.post(
    "/v1/explain",
    summary="Why jobs of an instance wait, and (optionally) what would start them",
    **guarded(Role.SUBMIT),
)
async def explain_endpoint(request: Request, body: ExplainRequest) -> list[dict[str, Any]]:
    """Explanations, most decisive reason first (counterfactuals re-solve: slower)."""
    result: list[dict[str, Any]] = await run(
        request,
        work.explain_file,
        body.instance,
        body.jobs,
        body.solver,
        body.counterfactuals,
        service_of(request).config.max_time_limit_s,
    )
    return result


@router.post(
    "/v1/whatif",
    summary="Re-solve an instance after one change and compare",
    **guarded(Role.SUBMIT),
)
async def whatif_endpoint(request: Request, body: WhatIfRequest) -> dict[str, Any]:
    """The jobs decided differently, and the objective before and after."""
    change = body.change.model_dump()
    result: dict[str, Any] = await run(
        request,
        work.whatif_file,
        body.instance,
        change,
        body.solver,
        service_of(request).config.max_time_limit_s,
    )
    return result


@router.get(
    "/v1/schemas/{kind}",
    summary="The published JSON Schema of instance@1 or decision@1",
    **guarded(Role.READ),
)
async def schema_endpoint(kind: Literal["instance", "decision"]) -> dict[str, Any]:
    """The JSON Schema a file of ``kind`` is validated against."""
    return schema(kind)
