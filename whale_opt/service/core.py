"""The service's parts in one place, and the one way a cluster changes.

:meth:`Service.commit` is how every change happens: under the cluster's
lock, complete it with what it takes from the cluster now
(:meth:`ClusterRuntime.stamp`), check it (:meth:`ClusterRuntime.precheck`),
apply it in memory, then write the event and the answer in one transaction;
only then is the answer sent. If the write fails the cluster is reloaded
from the database, so memory never keeps what the database lacks. Reads take
the same lock, so nobody sees a change before it is committed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from whale_opt.problem_data import FieldError
from whale_opt.service.auth import Authorizer, Principal, read_tokens
from whale_opt.service.cluster import ClusterRuntime
from whale_opt.service.config import ServiceConfig
from whale_opt.service.errors import ApiError, not_found
from whale_opt.service.metrics import Metrics
from whale_opt.service.pool import SolvePool
from whale_opt.service.storage import Store, StoredAnswer, StoredCluster

log = logging.getLogger("whale_opt")
T = TypeVar("T")


@dataclass(frozen=True)
class Idempotency:
    """An ``Idempotency-Key`` request: whose, which key, and what it asked."""

    principal: str
    key: str
    fingerprint: str

    def answer(self, status: int, body: Any) -> StoredAnswer:
        """The record that stores ``body`` as this request's answer."""
        return StoredAnswer(self.principal, self.key, self.fingerprint, status, json.dumps(body))


def replay(stored: StoredCluster) -> ClusterRuntime:
    """A cluster rebuilt from its snapshot (if any) and the events after it."""
    events = list(stored.events)
    if stored.snapshot is not None and stored.snapshot_seq is not None:
        runtime = ClusterRuntime.restore(stored.name, stored.snapshot_seq, stored.snapshot)
    else:
        seq, kind, payload = events.pop(0)
        if (seq, kind) != (0, "create"):
            raise ValueError(f"cluster {stored.name!r}: event log does not start with create")
        runtime = ClusterRuntime.from_create(stored.name, payload)
    for seq, kind, payload in events:
        if seq != runtime.seq + 1:
            raise ValueError(f"cluster {stored.name!r}: event {seq} after {runtime.seq}")
        runtime.apply_event(kind, payload)
    return runtime


class Service:
    """Configuration, storage, solver pool, metrics, auth and the clusters in memory."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        tokens = None if config.tokens_file is None else read_tokens(config.tokens_file)
        self.auth = Authorizer(tokens, config.open_extender)
        self.metrics = Metrics()
        self.store = Store(config.database_url)
        self.pool = SolvePool(config.workers, config.queue, config.pool, self.metrics.rejected.inc)
        self.clusters: dict[str, ClusterRuntime] = {}
        self._db = ThreadPoolExecutor(1, thread_name_prefix="whale-opt-db")
        self._users = 0  # lifespans open: a test harness may open one per request
        self._keys_in_flight: set[tuple[str, str]] = set()
        self._snapshotted: dict[str, int] = {}
        self._background: set[asyncio.Task[None]] = set()

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Load every cluster from storage and start the solver workers.

        Calls nest: only the first start (and the last :meth:`stop`) act.
        """
        self._users += 1
        if self._users > 1:
            return
        config = self.config
        self.pool = SolvePool(config.workers, config.queue, config.pool, self.metrics.rejected.inc)
        self._db = ThreadPoolExecutor(1, thread_name_prefix="whale-opt-db")
        self.clusters = {}
        pruned = self.store.prune_answers(self.config.idempotency_ttl_s)
        for stored in self.store.load_all():
            try:
                runtime = replay(stored)
            except Exception:  # a bad snapshot: replay the whole log instead
                log.exception("cluster %s: snapshot unusable, replaying its log", stored.name)
                full = self.store.load(stored.name, use_snapshot=False)
                assert full is not None
                runtime = replay(full)
            self.clusters[runtime.name] = runtime
            self._snapshotted[runtime.name] = stored.snapshot_seq or 0
        log.info("loaded %d clusters (%d old answers pruned)", len(self.clusters), pruned)
        self.pool.warm_up()

    def stop(self) -> None:
        """Stop the workers and close the database connections."""
        self._users = max(0, self._users - 1)
        if self._users:
            return
        self.pool.shutdown()
        self._db.shutdown(wait=True)
        self.store.close()

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking storage call on the database thread (one writer, in order)."""
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    # -- clusters ----------------------------------------------------------------------

    def get(self, name: str) -> ClusterRuntime:
        """Cluster ``name`` or a 404."""
        runtime = self.clusters.get(name)
        if runtime is None:
            raise not_found("cluster", name)
        return runtime

    @asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[ClusterRuntime]:
        """Cluster ``name``, its lock held (404 if it is deleted meanwhile)."""
        runtime = self.get(name)
        async with runtime.lock:
            if self.clusters.get(name) is not runtime:
                raise not_found("cluster", name)
            yield runtime

    async def reload(self, runtime: ClusterRuntime) -> None:
        """Replace ``runtime``'s state by the database's (its lock is held)."""
        stored = await self.db(self.store.load, runtime.name)
        if stored is None:
            self.clusters.pop(runtime.name, None)
            return
        fresh = replay(stored)
        runtime.scheduler, runtime.seq, runtime.clock = fresh.scheduler, fresh.seq, fresh.clock
        runtime.latest, runtime.changed_at = fresh.latest, fresh.seq

    async def commit(
        self,
        runtime: ClusterRuntime,
        kind: str,
        payload: dict[str, Any],
        body: Callable[[dict[str, Any]], Any],
        idem: Idempotency | None,
        status: int = 200,
    ) -> JSONResponse:
        """Apply event ``kind`` to ``runtime`` (lock held), store it with its answer,
        and return that answer: ``body`` of what the event did. The payload is
        stamped first (:meth:`ClusterRuntime.stamp`) and stored as stamped."""
        payload = runtime.stamp(kind, payload)
        runtime.precheck(kind, payload)
        try:
            done = runtime.apply_event(kind, payload)
        except (KeyError, ValueError, FieldError) as exc:
            await self.reload(runtime)  # a refusal the precheck missed: undo it
            raise ApiError(409, f"refused by the scheduler: {exc}") from None
        answer = body({"cluster": runtime.name, "seq": runtime.seq, **done})
        try:
            await self.db(
                self.store.append,
                runtime.name,
                runtime.seq,
                kind,
                payload,
                None if idem is None else idem.answer(status, answer),
            )
        except IntegrityError:
            await self.reload(runtime)
            raise ApiError(409, "the cluster changed under this request; retry it") from None
        except SQLAlchemyError as exc:
            log.error("cluster %s: event not stored: %s", runtime.name, exc)
            await self.reload(runtime)
            raise ApiError(
                503, "the database is unavailable; retry", headers={"Retry-After": "5"}
            ) from None
        self._maybe_snapshot(runtime)
        return JSONResponse(answer, status_code=status)

    def _maybe_snapshot(self, runtime: ClusterRuntime) -> None:
        if runtime.seq - self._snapshotted.get(runtime.name, 0) < self.config.snapshot_every:
            return
        self._snapshotted[runtime.name] = runtime.seq
        state, seq = runtime.snapshot(), runtime.seq

        async def save() -> None:
            try:
                await self.db(self.store.save_snapshot, runtime.name, seq, state)
            except SQLAlchemyError as exc:  # the log still has everything
                log.warning("cluster %s: snapshot at %d not saved: %s", runtime.name, seq, exc)

        task = asyncio.get_running_loop().create_task(save())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- idempotency ------------------------------------------------------------------

    async def idempotent(
        self,
        principal: Principal,
        key: str | None,
        request_id: str,
        act: Callable[[Idempotency | None], Awaitable[JSONResponse]],
    ) -> JSONResponse:
        """Run ``act`` once per ``(principal, key)``; a repeat gets the stored answer.

        ``request_id`` identifies what was asked (method, path, body): the same
        key with another request is a 422; while the first is in progress, 409.
        """
        if key is None:
            return await act(None)
        if not 1 <= len(key) <= 255 or not key.isprintable():
            raise ApiError(400, "Idempotency-Key must be 1 to 255 printable characters")
        fingerprint = hashlib.sha256(request_id.encode()).hexdigest()
        slot = (principal.name, key)
        if slot in self._keys_in_flight:
            raise ApiError(
                409,
                "a request with this Idempotency-Key is in progress",
                headers={"Retry-After": "1"},
            )
        self._keys_in_flight.add(slot)
        try:
            stored = await self.db(self.store.answer, principal.name, key)
            if stored is not None:
                if stored.fingerprint != fingerprint:
                    raise ApiError(422, "Idempotency-Key already used for a different request")
                return JSONResponse(
                    json.loads(stored.body),
                    status_code=stored.status,
                    headers={"Idempotent-Replayed": "true"},
                )
            return await act(Idempotency(principal.name, key, fingerprint))
        finally:
            self._keys_in_flight.discard(slot)
