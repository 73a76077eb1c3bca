"""The file boundary: instance@1 and decision@1 JSON, read and written.

Reading goes raw JSON -> JSON Schema -> records (which check themselves) ->
:class:`~whale_opt.problem_data.Instance` (which checks cross-references).
Every failure becomes one :class:`InputError` naming the file, the JSON path
and the bad value. Writing is atomic: a file is either whole or untouched.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import secrets
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.options import RUN_SETTINGS, SolveOptions
from whale_opt.problem_data import (
    DEFAULT_CLASS,
    DEFAULT_PRIORITY_CLASSES,
    FieldError,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)

INSTANCE_FORMAT = "whale-opt/instance@1"
DECISION_FORMAT = "whale-opt/decision@1"
SCHEMAS = {"instance": "instance.schema.json", "decision": "decision.schema.json"}

T = TypeVar("T")


class InputError(ValueError):
    """A bad input file: names the file, the JSON path and the value."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        super().__init__(f"{source}: {path}: {message}" if path else f"{source}: {message}")


@cache
def schema(kind: str) -> dict[str, Any]:
    """The published JSON Schema of ``kind`` (``instance`` or ``decision``)."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown schema {kind!r}; choose from {', '.join(SCHEMAS)}")
    text = resources.files("whale_opt.schemas").joinpath(SCHEMAS[kind]).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _show(value: Any, limit: int = 60) -> str:
    """``value`` as JSON, cut short: how every message quotes a bad value."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_path(parts: Any) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}


def _describe(spec: Any) -> str:
    """A short English description of what schema ``spec`` accepts."""
    if not isinstance(spec, dict):
        return "anything" if spec is True else "nothing"
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    if "const" in spec:
        return json.dumps(spec["const"])
    kinds = spec.get("type", "value")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(f"{'an' if k[0] in 'aeiou' else 'a'} {k}" for k in kinds)
    if "object" in kinds and spec.get("required"):
        text += " with " + ", ".join(json.dumps(k) for k in spec["required"])
    return text


def _schema_problem(error: jsonschema.ValidationError) -> tuple[str, str]:
    """The JSON path and a message naming the bad value, for one schema error."""
    parts = list(error.absolute_path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    spec = error.schema
    if kind == "required" and isinstance(value, dict):
        missing = next(name for name in expected if name not in value)
        message = "is required but missing"
        if "then" in error.schema_path and "action" in value:
            message += f" (action {_show(value['action'])} needs {', '.join(expected)})"
        return _json_path([*parts, missing]), message
    if kind == "additionalProperties" and expected is False and isinstance(value, dict):
        allowed = sorted(spec.get("properties", {}))
        extra = next(name for name in value if name not in allowed)
        close = difflib.get_close_matches(extra, allowed, n=1)
        hint = (
            f"did you mean {json.dumps(close[0])}?" if close else "allowed: " + ", ".join(allowed)
        )
        return _json_path([*parts, extra]), f"unknown field (got {_show(value[extra])}); {hint}"
    if kind in ("type", "enum", "const"):
        message = f"must be {_describe(spec)}"
    elif kind in ("oneOf", "anyOf"):
        message = "must be " + " or ".join(_describe(option) for option in expected)
    elif kind in _BOUNDS:
        message = f"must be {_BOUNDS[kind]} {expected}"
    elif kind in ("minLength", "minItems", "minProperties"):
        unit = {"minLength": "character", "minItems": "item", "minProperties": "entry"}[kind]
        message = "must not be empty" if expected == 1 else f"needs at least {expected} {unit}s"
    elif kind == "maxItems":
        message = f"needs at most {expected} items"
    elif kind == "pattern":
        message = f"must match the pattern {expected}"
    else:
        message = error.message
    return _json_path(parts), f"{message} (got {_show(value)})"


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(kind))


def _validate(raw: Any, kind: str, source: str) -> None:
    error = jsonschema.exceptions.best_match(_validator(kind).iter_errors(raw))
    if error is not None:
        raise InputError(source, *_schema_problem(error))


def _check_format(raw: Any, expected: str, source: str) -> None:
    """Refuse another format or version before schema details can confuse."""
    if isinstance(raw, dict) and raw.get("format") not in (None, expected):
        raise InputError(
            source,
            "format",
            f"unsupported format (got {_show(raw['format'])}); expected {json.dumps(expected)}",
        )


def load_json(path: str | Path) -> Any:
    """Parse a file as JSON; an unreadable, empty, binary or broken file is an InputError."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            source,
            f"byte {exc.start}",
            f"is not UTF-8 text, perhaps a binary file (got byte 0x{data[exc.start]:02x})",
        ) from exc
    if not text.strip():
        raise InputError(source, "(file)", f"is empty: no JSON value (got {len(data)} bytes)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        found = text[exc.pos : exc.pos + 20].split("\n")[0]
        got = _show(found) if found else "end of file" if exc.pos >= len(text) else "end of line"
        raise InputError(
            source,
            f"line {exc.lineno} column {exc.colno}",
            f"malformed JSON: {exc.msg} (got {got})",
        ) from exc


def _build(source: str, prefix: str, make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return make(*args, **kwargs)
    except FieldError as exc:
        located = exc.within(prefix) if prefix else exc
        raise InputError(
            source, located.path, f"{located.message} (got {_show(located.value)})"
        ) from exc


def instance_from_dict(raw: Any, source: str = "<instance>") -> Instance:
    """Validate and build an :class:`Instance` from parsed instance@1 JSON."""
    _check_format(raw, INSTANCE_FORMAT, source)
    _validate(raw, "instance", source)
    gpu_types = {
        name: _build(source, f"gpu_types.{name}", GpuType, name, **spec)
        for name, spec in raw["gpu_types"].items()
    }
    nodes = tuple(_build(source, f"nodes[{k}]", _node, spec) for k, spec in enumerate(raw["nodes"]))
    running = tuple(
        _build(source, f"running[{k}]", _running, spec)
        for k, spec in enumerate(raw.get("running", []))
    )
    queue = tuple(
        _build(source, f"queue[{k}]", _queued, spec) for k, spec in enumerate(raw.get("queue", []))
    )
    tenants = {
        name: _build(source, f"tenants.{name}", Tenant, name, **spec)
        for name, spec in raw.get("tenants", {}).items()
    }
    policy = _build(source, "policy", Policy, **_problem_policy(raw))
    classes = {
        name: _build(source, f"priority_classes.{name}", PriorityClass, name, **spec)
        for name, spec in raw.get("priority_classes", {}).items()
    }
    return _build(
        source,
        "",
        Instance,
        name=raw["name"],
        gpu_types=gpu_types,
        nodes=nodes,
        running=running,
        queue=queue,
        tenants=tenants,
        policy=policy,
        now=raw.get("now", 0),
        priority_classes=classes,
    )


def _problem_policy(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The ``policy`` block without its run settings (those are :class:`SolveOptions`)."""
    return {k: v for k, v in raw.get("policy", {}).items() if k not in RUN_SETTINGS}


def options_from_dict(raw: Any, source: str = "<instance>") -> SolveOptions:
    """The run settings of parsed instance@1 JSON (its ``policy`` block's
    ``time_limit_s``, ``seed`` and ``report_bound``; defaults where it is silent)."""
    block = raw.get("policy", {}) if isinstance(raw, Mapping) else {}
    settings = (
        {k: v for k, v in block.items() if k in RUN_SETTINGS} if isinstance(block, Mapping) else {}
    )
    return _build(source, "policy", SolveOptions, **settings)


def read_round(path: str | Path) -> tuple[Instance, SolveOptions]:
    """Read an instance@1 file as the problem and the run settings it names."""
    raw = load_json(path)
    instance = instance_from_dict(raw, str(path))
    return instance, options_from_dict(raw, str(path))


def _running(spec: Mapping[str, Any]) -> RunningJob:
    fields = dict(spec)
    fields["gpu_ids"] = tuple(fields.pop("gpus"))
    return RunningJob(**fields)


def _node(spec: Mapping[str, Any]) -> Node:
    fields = dict(spec)
    fields["gpu_count"] = fields.pop("gpus")
    nvlink = fields.get("nvlink", "pcie")
    if isinstance(nvlink, dict):
        fields["nvlink"] = tuple((int(a), int(b)) for a, b in nvlink["edges"])
    fields["failed_gpus"] = tuple(fields.get("failed_gpus", ()))
    return Node(**fields)


def _queued(spec: Mapping[str, Any]) -> QueuedJob:
    fields = dict(spec)
    fields["gpu_count"] = fields.pop("gpus")
    fields["gpu_types"] = tuple(fields.get("gpu_types", ()))
    fields["duration_by_type_s"] = tuple(sorted(fields.get("duration_by_type_s", {}).items()))
    fields["preferred_gpu_types"] = tuple(fields.get("preferred_gpu_types", ()))
    return QueuedJob(**fields)


def read_queue(path: str | Path) -> tuple[QueuedJob, ...]:
    """Queued jobs from a JSON file: ``{"queue": [...]}`` or a bare list of
    instance@1 queue items (checked against the instance schema's item rules)."""
    source = str(path)
    raw = load_json(path)
    items = raw.get("queue") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise InputError(source, "queue", "must be a non-empty list of queue items")
    # Validate as the queue of a minimal instance, so paths read queue[k].field.
    probe = {
        "format": INSTANCE_FORMAT,
        "name": "queue",
        "gpu_types": {"x": {"memory_gb": 1}},
        "nodes": [{"id": "x", "gpu_type": "x", "gpus": 1}],
        "queue": items,
    }
    _validate(probe, "instance", source)
    return tuple(_build(source, f"queue[{k}]", _queued, spec) for k, spec in enumerate(items))


def read_instance(path: str | Path) -> Instance:
    """Read an instance@1 file; raise :class:`InputError` on any problem."""
    return instance_from_dict(load_json(path), str(path))


def instance_to_dict(instance: Instance, options: SolveOptions | None = None) -> dict[str, Any]:
    """The instance@1 JSON object of ``instance`` (defaults left out), with the run
    settings of ``options`` in its ``policy`` block when given."""
    settings = {} if options is None else {k: getattr(options, k) for k in RUN_SETTINGS}
    return {
        "format": INSTANCE_FORMAT,
        "name": instance.name,
        "now": instance.now,
        "gpu_types": {
            t.name: {"memory_gb": t.memory_gb, "speed": t.speed}
            for t in instance.gpu_types.values()
        },
        "nodes": [_node_dict(node) for node in instance.nodes],
        "running": [_running_dict(job) for job in instance.running],
        "queue": [_queued_dict(job) for job in instance.queue],
        "tenants": {
            t.name: {
                key: value
                for key, value in dataclasses.asdict(t).items()
                if key != "name" and value is not None
            }
            for t in instance.tenants.values()
        },
        "priority_classes": {
            c.name: {
                "weight": c.weight,
                "rank": c.rank,
                "preemptible": c.preemptible,
                "max_wait_s": c.max_wait_s,
            }
            for c in instance.priority_classes.values()
            if DEFAULT_PRIORITY_CLASSES.get(c.name) != c
        },
        "policy": {
            **{
                key: value
                for key, value in dataclasses.asdict(instance.policy).items()
                if value is not None or key == "max_wait_s"  # null: no ceiling
            },
            **settings,
        },
    }


def _node_dict(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": node.id,
        "gpu_type": node.gpu_type,
        "gpus": node.gpu_count,
        "nvlink": node.nvlink
        if isinstance(node.nvlink, str)
        else {"edges": [list(edge) for edge in node.nvlink]},
        "cpu": node.cpu,
        "memory_gb": node.memory_gb,
        "rack": node.rack,
    }
    if node.zone is not None:
        out["zone"] = node.zone
    if node.down:
        out["down"] = True
    if node.failed_gpus:
        out["failed_gpus"] = list(node.failed_gpus)
    if node.draining:
        out["draining"] = True
    return out


def _running_dict(job: RunningJob) -> dict[str, Any]:
    return {
        "id": job.id,
        "tenant": job.tenant,
        "gpus": list(job.gpu_ids),
        "cpu": job.cpu,
        "memory_gb": job.memory_gb,
        "started_at": job.started_at,
        "remaining_s": job.remaining_s,
        "weight": job.weight,
        "preemptible": job.preemptible,
        "checkpoint_s": job.checkpoint_s,
        "priority_class": job.priority_class,
        **(
            {} if job.since_checkpoint_s is None else {"since_checkpoint_s": job.since_checkpoint_s}
        ),
    }


def _queued_dict(job: QueuedJob) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": job.id,
        "tenant": job.tenant,
        "gpus": job.gpu_count,
        "cpu": job.cpu,
        "memory_gb": job.memory_gb,
        "weight": job.weight,
        "submitted_at": job.submitted_at,
        "topology": job.topology,
        "preemptible": job.preemptible,
    }
    if job.gpu_types:
        out["gpu_types"] = list(job.gpu_types)
    if job.min_gpu_memory_gb:
        out["min_gpu_memory_gb"] = job.min_gpu_memory_gb
    if job.duration_s is not None:
        out["duration_s"] = job.duration_s
    if job.duration_by_type_s:
        out["duration_by_type_s"] = dict(job.duration_by_type_s)
    if job.zone is not None:
        out["zone"] = job.zone
    if job.attained_gpu_s:
        out["attained_gpu_s"] = job.attained_gpu_s
    if job.priority_class != DEFAULT_CLASS:
        out["priority_class"] = job.priority_class
    if job.preferred_gpu_types:
        out["preferred_gpu_types"] = list(job.preferred_gpu_types)
    if job.prefer_nvlink:
        out["prefer_nvlink"] = True
    return out


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    """The decision@1 JSON object of ``decision`` (``stats`` only when it has any)."""
    out: dict[str, Any] = {
        "format": DECISION_FORMAT,
        "instance": decision.instance,
        "solver": decision.solver,
        "status": decision.status.value,
        "objective": decision.objective,
        "bound": decision.bound,
        "gap": round(decision.gap, 6),
        "wall_s": round(decision.wall_s, 4),
        "horizon_s": decision.horizon_s,
        "jobs": [_job_dict(item) for item in decision.jobs],
    }
    if decision.stats:
        out["stats"] = dict(decision.stats)
    return out


def _job_dict(item: JobDecision) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.id, "action": item.action.value}
    if item.action is Action.START:
        out["gpus"] = list(item.gpu_ids)
    if item.start_s is not None:
        out["start_s"] = item.start_s
    if item.end_s is not None:
        out["end_s"] = item.end_s
    if item.action is Action.PLANNED:
        out["nodes"] = list(item.nodes)
        out["node_gpus"] = list(item.node_gpus)
    if item.reason is not None:
        out["reason"] = item.reason
    if item.dropped:
        out["dropped"] = [
            {"preference": preference, "reason": reason} for preference, reason in item.dropped
        ]
    return out


def decision_from_dict(raw: Any, source: str = "<decision>") -> Decision:
    """Validate and build a :class:`Decision` from parsed decision@1 JSON."""
    _check_format(raw, DECISION_FORMAT, source)
    _validate(raw, "decision", source)
    jobs = tuple(
        JobDecision(
            id=spec["id"],
            action=Action(spec["action"]),
            gpu_ids=tuple(spec.get("gpus", ())),
            start_s=spec.get("start_s"),
            end_s=spec.get("end_s"),
            nodes=tuple(spec.get("nodes", ())),
            node_gpus=tuple(spec.get("node_gpus", ())),
            reason=spec.get("reason"),
            dropped=tuple((d["preference"], d["reason"]) for d in spec.get("dropped", ())),
        )
        for spec in raw["jobs"]
    )
    return Decision(
        instance=raw["instance"],
        solver=raw["solver"],
        status=Status(raw["status"]),
        objective=raw["objective"],
        bound=raw["bound"],
        horizon_s=raw["horizon_s"],
        jobs=jobs,
        wall_s=raw.get("wall_s", 0.0),
        stats=dict(raw.get("stats", {})),
    )


def read_decision(path: str | Path) -> Decision:
    """Read a decision@1 file; raise :class:`InputError` on any problem."""
    return decision_from_dict(load_json(path), str(path))


def write_json(path: str | Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as JSON atomically (temp file, fsync, rename).

    On any failure the target is untouched and no temp file is left. The
    temp file is created like any new file (mode 0o666 less the umask), not
    with ``mkstemp``'s owner-only 0o600, so outputs stay readable by others.
    """
    target = Path(path)
    temp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(payload, stream, indent=1)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_instance(
    path: str | Path, instance: Instance, options: SolveOptions | None = None
) -> None:
    """Write ``instance`` (and the run settings of ``options``) as an instance@1 file."""
    write_json(path, instance_to_dict(instance, options))


def write_decision(path: str | Path, decision: Decision) -> None:
    """Write ``decision`` as a decision@1 file."""
    write_json(path, decision_to_dict(decision))
