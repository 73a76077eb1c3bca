"""whale_opt as an HTTP service: ``whale-opt serve`` (extra ``[service]``).

One process serves the stateless round endpoints (solve, check, explain,
what-if, the schemas), the round API of named clusters (one
:class:`~whale_opt.scheduler.Scheduler` each, its events kept in SQL so a
restart, even a ``kill -9``, loses no acknowledged change), the Kubernetes
scheduler-extender protocol, Prometheus metrics and a health probe.

The modules, bottom to top: :mod:`~whale_opt.service.config` (settings),
:mod:`~whale_opt.service.work` (what the solver pool runs: no FastAPI),
:mod:`~whale_opt.service.codec` and :mod:`~whale_opt.service.cluster` (a
cluster's state and its events), :mod:`~whale_opt.service.storage` (the
event log, snapshots and idempotency records in SQL),
:mod:`~whale_opt.service.pool` (solves off the event loop, bounded),
:mod:`~whale_opt.service.errors`, :mod:`~whale_opt.service.auth`,
:mod:`~whale_opt.service.limits`, :mod:`~whale_opt.service.metrics`,
:mod:`~whale_opt.service.models`, :mod:`~whale_opt.service.core` (the parts
together, and the one way a cluster changes), the routers
(:mod:`~whale_opt.service.stateless`, :mod:`~whale_opt.service.clusters`,
:mod:`~whale_opt.service.rounds`, :mod:`~whale_opt.service.extender`, with
:mod:`~whale_opt.service.routing`) and :mod:`~whale_opt.service.app`, which
wires them. FastAPI is imported only by this package, which the core library
never imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from whale_opt.service.config import ServiceConfig as ServiceConfig

if TYPE_CHECKING:
    from fastapi import FastAPI


def create_app(config: ServiceConfig | None = None) -> FastAPI:
    """The FastAPI application for ``config`` (imports FastAPI on first use)."""
    from whale_opt.service.app import create_app as build

    return build(config or ServiceConfig())
