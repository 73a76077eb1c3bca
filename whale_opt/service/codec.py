"""A Scheduler's state as JSON and back: what a cluster snapshot holds.

The state is the scheduler's tables (nodes, queue, running, remaining work,
restore times) plus its template and settings. Records are frozen
dataclasses of plain values and tuples, so a generic codec suffices: fields
to a JSON object, lists back to tuples. The round trip is exact; a test
compares every attribute of a scheduler with its decoded copy, so a field
added to the scheduler and missed here fails it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from whale_opt.io import instance_from_dict, instance_to_dict
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Node, QueuedJob
from whale_opt.scheduler import Placed, Scheduler

SNAPSHOT_VERSION = 1
R = TypeVar("R")


def plain(value: Any) -> Any:
    """A record (frozen dataclass of plain values and tuples) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    return value


def _frozen(value: Any) -> Any:
    return tuple(_frozen(item) for item in value) if isinstance(value, list) else value


def record(kind: type[R], raw: dict[str, Any]) -> R:
    """The ``kind`` record :func:`plain` described."""
    return kind(**{key: _frozen(value) for key, value in raw.items()})


def _placed(raw: dict[str, Any]) -> Placed:
    fields = {key: _frozen(value) for key, value in raw.items() if key != "job"}
    return Placed(job=record(QueuedJob, raw["job"]), **fields)


def settings_of(scheduler: Scheduler) -> dict[str, Any]:
    """The settings a scheduler was built with (policy name, run options, checkpoints)."""
    if scheduler.solver is None:
        raise ValueError("only schedulers of a registered policy name can be stored")
    return {
        "policy": scheduler.solver,
        "options": plain(scheduler.options),
        "checkpoint_interval_s": scheduler.checkpoint_interval_s,
        "checkpoint_s": scheduler.checkpoint_s,
        "split_above_gpus": scheduler.split_above_gpus,
        "carry_plan": scheduler.carry_plan,
    }


def build_scheduler(template: dict[str, Any], settings: dict[str, Any]) -> Scheduler:
    """A scheduler from an instance@1 object and :func:`settings_of`'s settings."""
    return Scheduler(
        instance_from_dict(template, "template"),
        settings["policy"],
        options=SolveOptions(**settings["options"]),
        checkpoint_interval_s=settings["checkpoint_interval_s"],
        checkpoint_s=settings["checkpoint_s"],
        split_above_gpus=settings["split_above_gpus"],
        carry_plan=settings.get("carry_plan", False),  # absent from older snapshots
    )


def encode(scheduler: Scheduler) -> dict[str, Any]:
    """The JSON form of ``scheduler``'s whole state."""
    template = scheduler.template.replace(queue=(), running=(), lost=())
    return {
        "version": SNAPSHOT_VERSION,
        "template": instance_to_dict(template),
        "settings": settings_of(scheduler),
        # JSON objects keep their order, and the queue's order is the round's.
        "nodes": {key: plain(node) for key, node in scheduler.nodes.items()},
        "queue": {key: plain(job) for key, job in scheduler.queue.items()},
        "running": {key: plain(held) for key, held in scheduler.running.items()},
        "work": {key: plain(job) for key, job in scheduler.work.items()},
        "restore_s": dict(scheduler.restore_s),
        "restore_due": dict(scheduler.restore_due),
        "plan": list(scheduler.plan),
    }


def decode(raw: dict[str, Any]) -> Scheduler:
    """The scheduler :func:`encode` described (ValueError for another version)."""
    if raw.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {raw.get('version')!r} is not {SNAPSHOT_VERSION}")
    scheduler = build_scheduler(raw["template"], raw["settings"])
    scheduler.nodes = {key: record(Node, node) for key, node in raw["nodes"].items()}
    scheduler.queue = {key: record(QueuedJob, job) for key, job in raw["queue"].items()}
    scheduler.running = {key: _placed(held) for key, held in raw["running"].items()}
    scheduler.work = {key: record(QueuedJob, job) for key, job in raw["work"].items()}
    scheduler.restore_s = {key: int(value) for key, value in raw["restore_s"].items()}
    scheduler.restore_due = {key: int(value) for key, value in raw["restore_due"].items()}
    scheduler.plan = tuple(str(job_id) for job_id in raw.get("plan", ()))  # none before it was kept
    return scheduler
