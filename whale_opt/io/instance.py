"""instance@1 JSON: an :class:`~whale_opt.problem_data.Instance` and its run
settings read from and written to files, queue items read on their own.

The file's one ``running`` list holds the jobs that were running when the
round began, lost ones too: a job with a GPU on a ``down`` node or in its
node's ``failed_gpus`` is read into :attr:`Instance.lost`, the others into
:attr:`Instance.running`, and both are written back into ``running``. Errors
name a job by its place in the file's list.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whale_opt.io.files import (
    INSTANCE_FORMAT,
    InputError,
    _check_format,
    _validate,
    build_in_file,
    load_json,
    write_json,
)
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
    hardware_failure,
)


def instance_from_dict(raw: Any, source: str = "<instance>") -> Instance:
    """Validate and build an :class:`Instance` from parsed instance@1 JSON."""
    _check_format(raw, INSTANCE_FORMAT, source)
    _validate(raw, "instance", source)
    gpu_types = {
        name: build_in_file(source, f"gpu_types.{name}", GpuType, name, **spec)
        for name, spec in raw["gpu_types"].items()
    }
    nodes = tuple(
        build_in_file(source, f"nodes[{k}]", _node, spec) for k, spec in enumerate(raw["nodes"])
    )
    running = [
        build_in_file(source, f"running[{k}]", _running, spec)
        for k, spec in enumerate(raw.get("running", []))
    ]
    by_id = {node.id: node for node in nodes}
    failed = {k for k, job in enumerate(running) if hardware_failure(by_id, job.gpu_ids, job.node)}
    where = {"running": [k for k in range(len(running)) if k not in failed], "lost": sorted(failed)}
    queue = tuple(
        build_in_file(source, f"queue[{k}]", _queued, spec)
        for k, spec in enumerate(raw.get("queue", []))
    )
    tenants = {
        name: build_in_file(source, f"tenants.{name}", Tenant, name, **spec)
        for name, spec in raw.get("tenants", {}).items()
    }
    policy = build_in_file(source, "policy", Policy, **_problem_policy(raw))
    classes = {
        name: build_in_file(source, f"priority_classes.{name}", PriorityClass, name, **spec)
        for name, spec in raw.get("priority_classes", {}).items()
    }
    return build_in_file(
        source,
        "",
        _in_file_order,
        where,
        name=raw["name"],
        gpu_types=gpu_types,
        nodes=nodes,
        running=tuple(running[k] for k in where["running"]),
        lost=tuple(running[k] for k in where["lost"]),
        queue=queue,
        tenants=tenants,
        policy=policy,
        now=raw.get("now", 0),
        priority_classes=classes,
    )


_LISTED = re.compile(r"^(running|lost)\[(\d+)\]")


def _in_file_order(where: Mapping[str, list[int]], **fields: Any) -> Instance:
    """The :class:`Instance` of ``fields``; an error about ``running[k]`` or
    ``lost[k]`` names the job's place in the file's ``running`` list instead
    (``where``: each list's positions there)."""
    try:
        return Instance(**fields)
    except FieldError as exc:
        found = _LISTED.match(exc.path)
        if found is None:
            raise
        place = where[found[1]][int(found[2])]
        path = f"running[{place}]{exc.path[found.end() :]}"
        raise FieldError(path, exc.value, exc.message) from exc


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
    return build_in_file(source, "policy", SolveOptions, **settings)


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
    return tuple(
        build_in_file(source, f"queue[{k}]", _queued, spec) for k, spec in enumerate(items)
    )


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
        "running": [_running_dict(job) for job in (*instance.running, *instance.lost)],
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
                if (value is not None or key == "max_wait_s")  # null: no ceiling
                and key != "gpu_second_prices"
            },
            **(
                {"gpu_second_prices": dict(instance.policy.gpu_second_prices)}
                if instance.policy.gpu_second_prices
                else {}
            ),
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
        **({} if not job.shares else {"gpu_milli": job.gpu_milli}),
        **({} if job.node is None else {"node": job.node}),
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
    if job.shares:
        out["gpu_milli"] = job.gpu_milli
    return out


def write_instance(
    path: str | Path, instance: Instance, options: SolveOptions | None = None
) -> None:
    """Write ``instance`` (and the run settings of ``options``) as an instance@1 file."""
    write_json(path, instance_to_dict(instance, options))
