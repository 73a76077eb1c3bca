"""Named clusters: create, read, delete, and tell them what happened.

The round API of :class:`~whale_opt.scheduler.Scheduler` over HTTP: submit,
finish, checkpointed, node down or back, drain. Every change is an event
committed before its answer (:meth:`~whale_opt.service.core.Service.commit`)
and takes an ``Idempotency-Key`` header: a retry with the same key gets the
first answer again and changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError

from whale_opt.service import codec, work
from whale_opt.service.auth import Role
from whale_opt.service.cluster import ClusterRuntime
from whale_opt.service.core import Idempotency
from whale_opt.service.errors import ApiError
from whale_opt.service.models import (
    AtTime,
    ClusterCreate,
    ClusterList,
    ClusterName,
    ClusterState,
    ClusterSummary,
    Drain,
    EventResult,
    NodeDown,
    Submit,
)
from whale_opt.service.routing import guarded, principal_of, request_id, service_of
from whale_opt.service.stateless import run

router = APIRouter(tags=["clusters (round API)"])
Identifier = Annotated[str, Path(min_length=1, max_length=256)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="Same key, same request: the stored answer again, no second effect.",
    ),
]


async def _event(
    request: Request,
    name: str,
    key: str | None,
    body: Any,
    kind: str,
    payload: dict[str, Any],
    status: int = 200,
) -> JSONResponse:
    """Commit one event of cluster ``name`` idempotently; answer what it did."""
    service = service_of(request)

    async def act(idem: Idempotency | None) -> JSONResponse:
        async with service.locked(name) as runtime:
            return await service.commit(runtime, kind, payload, lambda out: out, idem, status)

    return await service.idempotent(principal_of(request), key, request_id(request, body), act)


@router.post(
    "/v1/clusters",
    status_code=201,
    summary="Create a cluster from an instance@1 (its queue and running jobs are adopted)",
    **guarded(Role.ADMIN, response_model=ClusterSummary),
)
async def create_cluster(
    request: Request, body: ClusterCreate, key: IdempotencyKey = None
) -> JSONResponse:
    """A new named cluster with its own Scheduler."""
    service = service_of(request)
    if body.policy not in work.REGISTRY:
        raise ApiError(422, f"policy: unknown; choose from {', '.join(work.REGISTRY)}")
    instance, options = await run(request, work.parse_instance, body.instance)

    async def act(idem: Idempotency | None) -> JSONResponse:
        if body.name in service.clusters:
            raise ApiError(409, f"cluster {body.name!r} exists")
        try:
            from whale_opt.scheduler import Scheduler

            scheduler = Scheduler(
                instance,
                body.policy,
                options=options,
                preset=body.preset,
                checkpoint_interval_s=body.checkpoint_interval_s,
                checkpoint_s=body.checkpoint_s,
            )
        except ValueError as exc:
            raise ApiError(422, f"settings: {exc}") from None
        runtime = ClusterRuntime(body.name, scheduler)
        payload = {"instance": body.instance, "settings": codec.settings_of(scheduler)}
        summary = runtime.summary()
        try:
            await service.db(
                service.store.create,
                body.name,
                payload,
                None if idem is None else idem.answer(201, summary),
            )
        except IntegrityError:
            raise ApiError(409, f"cluster {body.name!r} exists") from None
        service.clusters[body.name] = runtime
        return JSONResponse(summary, status_code=201)

    return await service.idempotent(principal_of(request), key, request_id(request, body), act)


@router.get("/v1/clusters", summary="Every cluster, at a glance", **guarded(Role.READ))
async def list_clusters(request: Request) -> ClusterList:
    """Names, policies, clocks and counts."""
    service = service_of(request)
    found = []
    for name in sorted(service.clusters):
        async with service.locked(name) as runtime:
            found.append(ClusterSummary.model_validate(runtime.summary()))
    return ClusterList(clusters=found)


@router.get(
    "/v1/clusters/{name}",
    summary="A cluster's queue, running jobs and latest decision",
    **guarded(Role.READ),
)
async def cluster_state(request: Request, name: ClusterName) -> ClusterState:
    """The committed state (never a change still being written)."""
    async with service_of(request).locked(name) as runtime:
        return ClusterState.model_validate(runtime.state())


@router.delete(
    "/v1/clusters/{name}",
    summary="Forget a cluster",
    **guarded(Role.ADMIN, response_model=EventResult),
)
async def delete_cluster(
    request: Request, name: ClusterName, key: IdempotencyKey = None
) -> JSONResponse:
    """Its events and snapshot are deleted."""
    service = service_of(request)

    async def act(idem: Idempotency | None) -> JSONResponse:
        async with service.locked(name) as runtime:
            answer = {"cluster": name, "deleted": True, "seq": runtime.seq}
            await service.db(
                service.store.delete, name, None if idem is None else idem.answer(200, answer)
            )
            service.clusters.pop(name, None)
            return JSONResponse(answer)

    return await service.idempotent(principal_of(request), key, request_id(request, name), act)


@router.post(
    "/v1/clusters/{name}/jobs",
    status_code=201,
    summary=(
        "Submit a job (an instance@1 queue item; submitted_at on the cluster's clock,"
        " its current clock if absent)"
    ),
    **guarded(Role.SUBMIT, response_model=EventResult),
)
async def submit_job(
    request: Request, name: ClusterName, body: Submit, key: IdempotencyKey = None
) -> JSONResponse:
    """Queued; the next round considers it.

    Without ``submitted_at`` the job is submitted now: at the cluster's clock
    when the submission is applied (the answer's ``submitted_at``; a retry with
    the same ``Idempotency-Key`` and a restart keep that time). An explicit
    ``submitted_at``, 0 included, is kept as given.
    """
    service = service_of(request)
    runtime = service.get(name)
    job = work.queue_items([body.job], runtime.probe, "job", single=True)[0]
    record = codec.plain(job)
    if "submitted_at" not in body.job:  # the parsed job says 0: the file format's default
        del record["submitted_at"]  # stamped under the lock (ClusterRuntime.stamp)
    payload = {"job": record, "checkpoint_s": body.checkpoint_s}
    return await _event(request, name, key, body, "submit", payload, 201)


@router.get(
    "/v1/clusters/{name}/jobs/{job_id}",
    summary="One job: running (GPUs, times) or queued (its plan, if any)",
    **guarded(Role.READ),
)
async def job_status(request: Request, name: ClusterName, job_id: Identifier) -> dict[str, Any]:
    """Where a job stands."""
    async with service_of(request).locked(name) as runtime:
        return runtime.job_view(job_id)


@router.post(
    "/v1/clusters/{name}/jobs/{job_id}/finish",
    summary="A job ended or was cancelled: its GPUs are free",
    **guarded(Role.SUBMIT, response_model=EventResult),
)
async def finish_job(
    request: Request, name: ClusterName, job_id: Identifier, key: IdempotencyKey = None
) -> JSONResponse:
    """Gone from the cluster."""
    return await _event(request, name, key, job_id, "finish", {"job_id": job_id})


@router.post(
    "/v1/clusters/{name}/jobs/{job_id}/checkpointed",
    summary="A running job saved its state at `now`",
    **guarded(Role.SUBMIT, response_model=EventResult),
)
async def job_checkpointed(
    request: Request,
    name: ClusterName,
    job_id: Identifier,
    body: AtTime,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """An interruption now loses only the work since."""
    payload = {"job_id": job_id, "now": body.now}
    return await _event(request, name, key, body, "checkpointed", payload)


@router.post(
    "/v1/clusters/{name}/nodes/{node_id}/down",
    summary="A node goes down (its jobs are requeued) or comes back (down: false)",
    **guarded(Role.ADMIN, response_model=EventResult),
)
async def node_down(
    request: Request,
    name: ClusterName,
    node_id: Identifier,
    body: NodeDown,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Jobs that lost GPUs go back to the queue with the work of their last checkpoint."""
    payload = {"node_id": node_id, "down": body.down, "now": body.now}
    return await _event(request, name, key, body, "node", payload)


@router.post(
    "/v1/clusters/{name}/nodes/{node_id}/drain",
    summary="A node takes no new work (draining: false resumes); its jobs go on",
    **guarded(Role.ADMIN, response_model=EventResult),
)
async def node_drain(
    request: Request,
    name: ClusterName,
    node_id: Identifier,
    body: Drain,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """The jobs still running there are listed: the node is empty once they end."""
    payload = {"node_id": node_id, "draining": body.draining}
    return await _event(request, name, key, body, "drain", payload)
