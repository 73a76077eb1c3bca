"""A cluster's rounds: propose, decide, apply, and the pre-warming hints.

``decide`` snapshots the cluster under its lock, solves in the pool with
the lock released (submissions keep coming in), then, under the lock again,
commits the decision as an ``apply`` event together with its answer, in one
transaction. A decide killed before that commit left no trace; after it,
the starts are durable and a retry with the same ``Idempotency-Key`` gets
the same decision, never a second start. If anything but submissions
changed the cluster during the solve (a node went down, a job finished, a
decision was applied), the round is solved again on the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse

from whale_opt.check import check
from whale_opt.decision import Decision
from whale_opt.io import InputError, decision_from_dict, decision_to_dict
from whale_opt.problem_data import FieldError, Instance
from whale_opt.service import work
from whale_opt.service.auth import Role
from whale_opt.service.cluster import ClusterRuntime
from whale_opt.service.core import Idempotency, Service
from whale_opt.service.errors import ApiError, from_field_error, from_input_error
from whale_opt.service.models import Apply, ClusterName, Prewarm, PrewarmHint, Round
from whale_opt.service.routing import (
    decision_response,
    guarded,
    principal_of,
    request_id,
    service_of,
)

router = APIRouter(tags=["clusters (round API)"])
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]
ROUND_ATTEMPTS = 3


def _fixed(answer: Any) -> Callable[[dict[str, Any]], Any]:
    """An answer that is ``answer`` whatever the event did (a decision@1 object)."""
    return lambda _: answer


def _snapshot(runtime: ClusterRuntime, now: int) -> Instance:
    """The round's instance at ``now`` (409 before the cluster's clock)."""
    if now < runtime.clock:
        raise ApiError(409, f"now={now} is before the cluster's clock ({runtime.clock})")
    try:
        return runtime.scheduler.snapshot(now)
    except FieldError as exc:
        raise from_field_error(exc, "state") from None


async def _solve(
    service: Service, runtime: ClusterRuntime, instance: Instance, body: Round
) -> Decision:
    scheduler = runtime.scheduler
    assert scheduler.solver is not None
    limit = service.config.time_limit(body.time_limit_s, scheduler.options.time_limit_s)
    decision: Decision = await service.pool.run(
        service.config.request_timeout_s,
        work.solve_round,
        instance,
        scheduler.solver,
        scheduler.options,
        limit,
        scheduler.split_above_gpus,
    )
    return decision


@router.post(
    "/v1/clusters/{name}/propose",
    summary="The policy's decision for a round at `now`; the state is left as it is",
    response_class=JSONResponse,
    **guarded(Role.SUBMIT, responses=decision_response("The proposed decision (decision@1).")),
)
async def propose(request: Request, name: ClusterName, body: Round) -> JSONResponse:
    """Look before applying (``apply`` takes the decision back)."""
    service = service_of(request)
    async with service.locked(name) as runtime:
        instance = _snapshot(runtime, body.now)
    decision = await _solve(service, runtime, instance, body)
    service.metrics.observe_round("propose", decision)
    return JSONResponse(decision_to_dict(decision))


@router.post(
    "/v1/clusters/{name}/decide",
    summary="Decide a round at `now` and apply its starts and preemptions",
    response_class=JSONResponse,
    **guarded(Role.ADMIN, responses=decision_response("The applied decision (decision@1).")),
)
async def decide(
    request: Request, name: ClusterName, body: Round, key: IdempotencyKey = None
) -> JSONResponse:
    """Durable before answered: a retry with the same key gets this decision again."""
    service = service_of(request)

    async def act(idem: Idempotency | None) -> JSONResponse:
        runtime = service.get(name)
        if runtime.deciding:
            raise ApiError(
                409, f"cluster {name!r} is deciding a round", headers={"Retry-After": "1"}
            )
        runtime.deciding = True
        try:
            return await _decide(service, name, body, idem)
        finally:
            runtime.deciding = False

    return await service.idempotent(principal_of(request), key, request_id(request, body), act)


async def _decide(
    service: Service, name: str, body: Round, idem: Idempotency | None
) -> JSONResponse:
    for _ in range(ROUND_ATTEMPTS):
        async with service.locked(name) as runtime:
            instance = _snapshot(runtime, body.now)
            seen = runtime.changed_at
        decision = await _solve(service, runtime, instance, body)
        async with service.locked(name) as runtime:
            if runtime.changed_at != seen:
                continue  # the state moved under the round: solve it again
            payload = {"now": body.now, "decision": decision_to_dict(decision), "source": "decide"}
            answer = _fixed(payload["decision"])
            response = await service.commit(runtime, "apply", payload, answer, idem)
        service.metrics.observe_round("decide", decision)
        return response
    raise ApiError(
        409, "the cluster kept changing during the round; retry", headers={"Retry-After": "1"}
    )


@router.post(
    "/v1/clusters/{name}/apply",
    summary="Apply a decision (e.g. a reviewed proposal) at `now`, after the checker passes it",
    response_class=JSONResponse,
    **guarded(Role.ADMIN, responses=decision_response("The applied decision (decision@1).")),
)
async def apply(
    request: Request, name: ClusterName, body: Apply, key: IdempotencyKey = None
) -> JSONResponse:
    """A decision the checker rejects for the current state is a 422 naming every violation."""
    service = service_of(request)
    try:
        decision = decision_from_dict(body.decision, "decision")
    except InputError as exc:
        raise from_input_error(exc, "decision") from None

    async def act(idem: Idempotency | None) -> JSONResponse:
        async with service.locked(name) as runtime:
            instance = _snapshot(runtime, body.now)
            # Jobs submitted after the proposal have no decision in it: they stay queued
            # for the next round, and are not the decision's to account for.
            decided = {item.id for item in decision.jobs}
            if any(job.id not in decided for job in instance.queue):
                instance = instance.replace(
                    queue=tuple(job for job in instance.queue if job.id in decided)
                )
            violations = check(instance, decision)
            if violations:
                errors: list[dict[str, Any]] = [
                    {"path": "decision", "message": str(v), "value": v.job} for v in violations
                ]
                raise ApiError(422, f"the checker rejects the decision: {violations[0]}", errors)
            payload = {"now": body.now, "decision": decision_to_dict(decision), "source": "apply"}
            answer = _fixed(payload["decision"])
            return await service.commit(runtime, "apply", payload, answer, idem)

    return await service.idempotent(principal_of(request), key, request_id(request, body), act)


@router.get(
    "/v1/clusters/{name}/prewarm",
    summary="Jobs planned to start within a lookahead window: nodes and expected start",
    **guarded(Role.READ),
)
async def prewarm(
    request: Request,
    name: ClusterName,
    lookahead_s: Annotated[int, Query(ge=0, le=30 * 86400)] = 900,
    now: Annotated[int | None, Query(ge=-(2**53), le=2**53)] = None,
) -> Prewarm:
    """From the latest decision's planned jobs still queued (``now``: the cluster's clock)."""
    async with service_of(request).locked(name) as runtime:
        at = runtime.clock if now is None else now
        return Prewarm(
            cluster=name,
            now=at,
            lookahead_s=lookahead_s,
            decided_at=None if runtime.latest is None else runtime.latest.now,
            jobs=[PrewarmHint(**hint) for hint in runtime.prewarm(at, lookahead_s)],
        )
