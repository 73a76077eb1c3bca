"""Request and response bodies (pydantic), and the published formats as OpenAPI schemas.

instance@1, decision@1 and a queue item are not re-modelled here: their
published JSON Schemas (``whale_opt/schemas/``) are put into the OpenAPI
document as ``InstanceV1``, ``DecisionV1`` and ``QueueItemV1``
(:func:`format_schemas`), and bodies that carry them are validated by the
same code that reads files, so the service and the files cannot disagree.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from whale_opt.io import schema

CLUSTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# Clocks are seconds; 2**53 keeps them exact in every JSON reader.
Clock = Annotated[int, Field(ge=-(2**53), le=2**53)]
Seconds = Annotated[int, Field(ge=0, le=2**31)]
ClusterName = Annotated[
    str, Path(pattern=CLUSTER_NAME, description="Cluster name.", examples=["prod"])
]


def _ref(name: str) -> dict[str, Any]:
    # Wrapped in allOf: pydantic resolves a bare top-level $ref among its own models.
    return {"allOf": [{"$ref": f"#/components/schemas/{name}"}]}


InstanceBody = Annotated[dict[str, Any], WithJsonSchema(_ref("InstanceV1"))]
DecisionBody = Annotated[dict[str, Any], WithJsonSchema(_ref("DecisionV1"))]
QueueItemBody = Annotated[dict[str, Any], WithJsonSchema(_ref("QueueItemV1"))]


def format_schemas() -> dict[str, Any]:
    """The published formats as OpenAPI component schemas (JSON Schema 2020-12)."""
    instance = copy.deepcopy(schema("instance"))
    decision = copy.deepcopy(schema("decision"))
    queue_item = copy.deepcopy(instance["properties"]["queue"]["items"])
    for spec in (instance, decision):
        spec.pop("$schema", None)
        spec.pop("$id", None)
    return {"InstanceV1": instance, "DecisionV1": decision, "QueueItemV1": queue_item}


class Strict(BaseModel):
    """Bodies refuse unknown fields (a typo is an error, not a silent default) and
    values of another JSON type (``0`` is not ``false``, ``"5"`` is not ``5``)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Problem(BaseModel):
    """An error: one line, and per field the JSON path, the message and the value."""

    detail: str
    errors: list[dict[str, Any]] = []


class CheckRequest(Strict):
    """An instance and a decision to verify."""

    instance: InstanceBody
    decision: DecisionBody


class Violation(BaseModel):
    """One broken rule."""

    job: str | None
    kind: str
    message: str


class CheckResult(BaseModel):
    """The checker's verdict: ok when no rule is broken."""

    ok: bool
    violations: list[Violation]


class ExplainRequest(Strict):
    """Which jobs of an instance to explain (all not started by default)."""

    instance: InstanceBody
    jobs: list[str] | None = Field(default=None, max_length=1000)
    solver: str = "wspt"
    counterfactuals: bool = Field(
        default=False, description="Also try small changes, each verified by re-solving."
    )


class Change(Strict):
    """One edit of the instance (see ``whale-opt whatif``)."""

    kind: Literal["add-jobs", "fail-node", "drain", "quota", "gpu-types", "topology", "preempt"]
    target: str = Field(default="", description="Node, tenant or queued job it applies to.")
    value: int | str | list[str] | None = Field(
        default=None,
        description="quota: GPUs; topology: its name; gpu-types: names; preempt: running job ids.",
    )
    jobs: list[QueueItemBody] = Field(default=[], description="add-jobs: queue items.")


class WhatIfRequest(Strict):
    """An instance and one change to compare."""

    instance: InstanceBody
    change: Change
    solver: str = "wspt"


class ClusterCreate(Strict):
    """A new cluster: its nodes, types, tenants and policy (and initial jobs)."""

    name: str = Field(pattern=CLUSTER_NAME)
    instance: InstanceBody
    policy: str = Field(default="cpsat", description="Solver or policy of every round.")
    preset: str | None = Field(default=None, description="CP-SAT parameter preset.")
    checkpoint_interval_s: int | None = Field(default=None, ge=1, le=2**31)
    checkpoint_s: Seconds = 0


class Submit(Strict):
    """A job to queue; its ``submitted_at`` is on the cluster's clock (absent: now,
    the cluster's clock when the submission is applied)."""

    job: QueueItemBody = Field(
        description=(
            "An instance@1 queue item. Its submitted_at is on the cluster's clock; absent,"
            " it is the clock when the submission is applied (an explicit 0 is kept)."
        )
    )
    checkpoint_s: Seconds | None = Field(default=None, description="Its restore time.")


class AtTime(Strict):
    """A moment on the cluster's clock (seconds)."""

    now: Clock


class NodeDown(Strict):
    """A node goes down (its jobs are requeued from their last checkpoint) or comes back."""

    now: Clock
    down: bool = True


class Drain(Strict):
    """A node stops (or resumes) taking new work."""

    draining: bool = True


class Round(Strict):
    """A round at ``now``; ``time_limit_s`` is capped by the server."""

    now: Clock
    time_limit_s: float | None = Field(default=None, gt=0, le=3600)


class Apply(Strict):
    """A decision (e.g. a reviewed proposal) to apply at ``now``."""

    now: Clock
    decision: DecisionBody


class ClusterSummary(BaseModel):
    """A cluster at a glance."""

    name: str
    policy: str | None
    seq: int
    clock: int
    queued: int
    running: int
    nodes: int
    nodes_down: list[str]
    nodes_draining: list[str]
    decided_at: int | None
    deciding: bool


class ClusterState(ClusterSummary):
    """A cluster's jobs and its latest decision."""

    queue: list[dict[str, Any]]
    running_jobs: list[dict[str, Any]]
    latest: dict[str, Any] | None


class ClusterList(BaseModel):
    """Every cluster."""

    clusters: list[ClusterSummary]


class EventResult(BaseModel):
    """A change recorded: the cluster, its event number, what it did."""

    model_config = ConfigDict(extra="allow")
    cluster: str
    seq: int


class PrewarmHint(BaseModel):
    """A job expected to start soon, where and when: pull its image, stage its data."""

    id: str
    nodes: list[str]
    node_gpus: list[int]
    expected_start: int
    starts_in_s: int


class Prewarm(BaseModel):
    """Jobs the latest decision plans to start within the lookahead window."""

    cluster: str
    now: int
    lookahead_s: int
    decided_at: int | None
    jobs: list[PrewarmHint]


class Health(BaseModel):
    """Liveness and a few counts."""

    status: Literal["ok"]
    clusters: int
    pool_in_flight: int
    pool_capacity: int
