"""Prometheus metrics: round latency and gap, queue lengths, decisions by action.

Each application has its own registry (tests build several apps in one
process). Cluster gauges are refreshed from the clusters' state when
``/metrics`` is scraped, so they never go stale and a deleted cluster's
series disappear.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from whale_opt.decision import Decision

if TYPE_CHECKING:
    from whale_opt.service.cluster import ClusterRuntime

__all__ = ["CONTENT_TYPE", "Metrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
GAP_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class Metrics:
    """The service's metrics, in one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.round_seconds = Histogram(
            "whale_opt_round_seconds",
            "Wall time of a round's solve, seconds (the solver's own wall_s).",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.round_gap = Histogram(
            "whale_opt_round_gap",
            "Relative gap between a round's objective and its proven bound.",
            ["endpoint"],
            buckets=GAP_BUCKETS,
            registry=reg,
        )
        self.decisions = Counter(
            "whale_opt_decisions",
            "Job decisions returned, by endpoint and action.",
            ["endpoint", "action"],
            registry=reg,
        )
        self.requests = Counter(
            "whale_opt_http_requests",
            "HTTP requests answered, by method, route and status code.",
            ["method", "route", "status"],
            registry=reg,
        )
        self.request_seconds = Histogram(
            "whale_opt_http_request_seconds",
            "HTTP request latency, seconds, by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.rejected = Counter(
            "whale_opt_rejected",
            "Requests refused with 503 because the solver pool was saturated.",
            registry=reg,
        )
        self.pool_in_flight = Gauge(
            "whale_opt_pool_in_flight", "Solves running or waiting for a worker.", registry=reg
        )
        self.pool_capacity = Gauge(
            "whale_opt_pool_capacity", "Solves allowed in flight before 503.", registry=reg
        )
        self.queue_length = Gauge(
            "whale_opt_queue_length", "Queued jobs of a cluster.", ["cluster"], registry=reg
        )
        self.running_jobs = Gauge(
            "whale_opt_running_jobs", "Running jobs of a cluster.", ["cluster"], registry=reg
        )
        self.cluster_gap = Gauge(
            "whale_opt_cluster_gap",
            "Gap of a cluster's latest decision.",
            ["cluster"],
            registry=reg,
        )
        self.cluster_events = Gauge(
            "whale_opt_cluster_events", "Events in a cluster's log.", ["cluster"], registry=reg
        )

    def observe_round(self, endpoint: str, decision: Decision) -> None:
        """Record one round's latency, gap and decisions."""
        self.round_seconds.labels(endpoint).observe(decision.wall_s)
        self.round_gap.labels(endpoint).observe(decision.gap)
        for item in decision.jobs:
            self.decisions.labels(endpoint, item.action.value).inc()

    def render(self, clusters: Iterable[ClusterRuntime], in_flight: int, capacity: int) -> bytes:
        """The text exposition, cluster gauges refreshed first."""
        for gauge in (self.queue_length, self.running_jobs, self.cluster_gap, self.cluster_events):
            gauge.clear()
        for runtime in clusters:
            self.queue_length.labels(runtime.name).set(len(runtime.scheduler.queue))
            self.running_jobs.labels(runtime.name).set(len(runtime.scheduler.running))
            self.cluster_events.labels(runtime.name).set(runtime.seq)
            if runtime.latest is not None:
                self.cluster_gap.labels(runtime.name).set(runtime.latest.decision.gap)
        self.pool_in_flight.set(in_flight)
        self.pool_capacity.set(capacity)
        return generate_latest(self.registry)
