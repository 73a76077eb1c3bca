"""Durable state in SQL (SQLAlchemy Core): an event log per cluster, snapshots,
and the stored answers of idempotent requests.

- ``events(cluster, seq)``: the cluster's ``create`` event is seq 0, each
  later change the next number. The primary key makes an event number
  unique, so two writers that both believe they append event n cannot both
  succeed (the loser reloads and retries).
- ``snapshots(cluster)``: the latest full state and the seq it includes; a
  restart loads it and replays only the events after it.
- ``idempotency(principal, key)``: the request's fingerprint and the answer
  sent, written *in the same transaction* as the event it answers. A
  retried request finds the answer; a request killed before its commit left
  neither.

SQLite (the default, a file) runs in WAL mode with ``synchronous=FULL``: a
transaction is on disk when its commit returns, before the 2xx is sent. Any
SQLAlchemy URL works the same (PostgreSQL for production).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    insert,
    select,
)

metadata = MetaData()
clusters_table = Table(
    "clusters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
)
events_table = Table(
    "events",
    metadata,
    Column("cluster", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("payload", Text, nullable=False),
    Column("at", Float, nullable=False),
)
snapshots_table = Table(
    "snapshots",
    metadata,
    Column("cluster", String(64), primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("state", Text, nullable=False),
    Column("at", Float, nullable=False),
)
idempotency_table = Table(
    "idempotency",
    metadata,
    Column("principal", String(128), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Column("body", Text, nullable=False),
    Column("at", Float, nullable=False),
)


@dataclass(frozen=True)
class StoredAnswer:
    """The answer sent to an idempotent request, and what identified the request."""

    principal: str
    key: str
    fingerprint: str
    status: int
    body: str


@dataclass(frozen=True)
class StoredCluster:
    """What a restart needs of one cluster: a snapshot (if any) and the events after it."""

    name: str
    snapshot_seq: int | None
    snapshot: dict[str, Any] | None
    events: list[tuple[int, str, dict[str, Any]]]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _sqlite_pragmas(dbapi_connection: Any, _: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


class Store:
    """The service's tables behind one engine. Blocking: call it off the event loop."""

    def __init__(self, url: str) -> None:
        self.url = url
        sqlite = url.startswith("sqlite")
        self.engine: Engine = create_engine(
            url,
            connect_args={"check_same_thread": False} if sqlite else {},
            pool_pre_ping=not sqlite,
        )
        if sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        metadata.create_all(self.engine)

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    # -- writes (each one transaction) ----------------------------------------------

    def _answer(self, conn: Connection, answer: StoredAnswer | None) -> None:
        if answer is not None:
            conn.execute(
                insert(idempotency_table).values(
                    principal=answer.principal,
                    key=answer.key,
                    fingerprint=answer.fingerprint,
                    status=answer.status,
                    body=answer.body,
                    at=time.time(),
                )
            )

    def create(self, name: str, payload: dict[str, Any], answer: StoredAnswer | None) -> None:
        """A new cluster and its ``create`` event (IntegrityError if the name is taken)."""
        now = time.time()
        with self.engine.begin() as conn:
            conn.execute(insert(clusters_table).values(name=name, created_at=now))
            conn.execute(
                insert(events_table).values(
                    cluster=name, seq=0, kind="create", payload=_dumps(payload), at=now
                )
            )
            self._answer(conn, answer)

    def append(
        self,
        name: str,
        seq: int,
        kind: str,
        payload: dict[str, Any],
        answer: StoredAnswer | None,
    ) -> None:
        """Event ``seq`` of cluster ``name`` with the answer it got, atomically
        (IntegrityError if that event number is taken)."""
        with self.engine.begin() as conn:
            conn.execute(
                insert(events_table).values(
                    cluster=name, seq=seq, kind=kind, payload=_dumps(payload), at=time.time()
                )
            )
            self._answer(conn, answer)

    def delete(self, name: str, answer: StoredAnswer | None) -> None:
        """Forget cluster ``name``: its events and snapshot."""
        with self.engine.begin() as conn:
            for table in (events_table, snapshots_table):
                conn.execute(delete(table).where(table.c.cluster == name))
            conn.execute(delete(clusters_table).where(clusters_table.c.name == name))
            self._answer(conn, answer)

    def save_snapshot(self, name: str, seq: int, state: dict[str, Any]) -> None:
        """Replace cluster ``name``'s snapshot by ``state`` (which includes event ``seq``)."""
        with self.engine.begin() as conn:
            conn.execute(delete(snapshots_table).where(snapshots_table.c.cluster == name))
            conn.execute(
                insert(snapshots_table).values(
                    cluster=name, seq=seq, state=_dumps(state), at=time.time()
                )
            )

    def prune_answers(self, older_than_s: float) -> int:
        """Drop stored answers older than ``older_than_s`` seconds; how many."""
        with self.engine.begin() as conn:
            result = conn.execute(
                delete(idempotency_table).where(idempotency_table.c.at < time.time() - older_than_s)
            )
            return int(result.rowcount or 0)

    # -- reads ------------------------------------------------------------------------

    def answer(self, principal: str, key: str) -> StoredAnswer | None:
        """The stored answer of ``principal``'s request with idempotency ``key``."""
        table = idempotency_table
        with self.engine.connect() as conn:
            row = conn.execute(
                select(table.c.fingerprint, table.c.status, table.c.body).where(
                    table.c.principal == principal, table.c.key == key
                )
            ).first()
        return None if row is None else StoredAnswer(principal, key, row[0], row[1], row[2])

    def names(self) -> list[str]:
        """The stored clusters' names."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(clusters_table.c.name).order_by(clusters_table.c.name))
            return [row[0] for row in rows]

    def load(self, name: str, use_snapshot: bool = True) -> StoredCluster | None:
        """Cluster ``name``'s latest snapshot and the events after it (None: unknown)."""
        with self.engine.connect() as conn:
            snap = None
            if use_snapshot:
                snap = conn.execute(
                    select(snapshots_table.c.seq, snapshots_table.c.state).where(
                        snapshots_table.c.cluster == name
                    )
                ).first()
            after = -1 if snap is None else snap[0]
            rows = conn.execute(
                select(events_table.c.seq, events_table.c.kind, events_table.c.payload)
                .where(events_table.c.cluster == name, events_table.c.seq > after)
                .order_by(events_table.c.seq)
            ).all()
        if snap is None and not rows:
            return None
        events = [(row[0], row[1], json.loads(row[2])) for row in rows]
        if snap is None:
            return StoredCluster(name, None, None, events)
        return StoredCluster(name, snap[0], json.loads(snap[1]), events)

    def load_all(self) -> Iterator[StoredCluster]:
        """Every stored cluster, as :meth:`load` gives it."""
        for name in self.names():
            stored = self.load(name)
            if stored is not None:
                yield stored
