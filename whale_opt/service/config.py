"""The service's settings: where state lives, who may call, how much work at once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one ``whale-opt serve`` process.

    Parameters
    ----------
    db
        A file path (SQLite, WAL mode: the no-setup default) or any
        SQLAlchemy URL (``postgresql+psycopg://user@host/whale``).
    tokens_file
        Bearer tokens and their roles (see :mod:`whale_opt.service.auth`);
        None: no authentication (bind to 127.0.0.1 then).
    workers
        Solver worker processes (``pool="process"``) or threads.
    queue
        Solve requests allowed to wait for a worker; past ``workers + queue``
        in flight a request is answered 503 with ``Retry-After``.
    max_body_bytes
        Largest request body accepted (413 beyond).
    max_time_limit_s
        Cap of any round's time limit, whatever the request or file asks.
    request_timeout_s
        Longest a request waits for its solve (queueing included) before a 503.
    snapshot_every
        A cluster's state is snapshotted every this many events, so a restart
        replays at most that many.
    pool
        ``process`` (solves in parallel on all cores) or ``thread`` (one
        process: quicker to start, for tests and small rounds).
    extender_timeout_s
        How long the Kubernetes filter waits for an explanation before it
        answers with the latest decision's reason alone.
    idempotency_ttl_s
        Stored responses of idempotent requests older than this are dropped
        at start-up.
    open_extender
        The Kubernetes extender routes (read-only) need no token even when
        tokens are configured: kube-scheduler cannot send an Authorization
        header, so restrict who reaches them otherwise (a NetworkPolicy).
    """

    db: str = "whale-opt.db"
    tokens_file: Path | None = None
    workers: int = 2
    queue: int = 64
    max_body_bytes: int = 16 * MiB
    max_time_limit_s: float = 30.0
    request_timeout_s: float = 120.0
    snapshot_every: int = 200
    pool: str = "process"
    extender_timeout_s: float = 5.0
    idempotency_ttl_s: float = 7 * 24 * 3600.0
    open_extender: bool = False

    def __post_init__(self) -> None:
        for name in ("workers", "snapshot_every", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.queue < 0:
            raise ValueError(f"queue must be >= 0 (got {self.queue})")
        for name in ("max_time_limit_s", "request_timeout_s", "extender_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 (got {getattr(self, name)})")
        if self.pool not in ("process", "thread"):
            raise ValueError(f"pool must be process or thread (got {self.pool!r})")

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of :attr:`db` (a bare path is a SQLite file)."""
        if "://" in self.db:
            return self.db
        return f"sqlite:///{Path(self.db).expanduser().resolve()}"

    def time_limit(self, asked: float | None, default: float) -> float:
        """The round time limit to use: ``asked`` (else ``default``), capped."""
        return min(asked if asked is not None else default, self.max_time_limit_s)
