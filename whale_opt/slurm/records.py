"""``squeue --json`` and ``sinfo --json`` (Slurm 22.05, OpenAPI v0.0.38) as records.

Pure: the documents come in as parsed JSON, records go out; nothing here
calls Slurm. Only the fields the bridge reads are kept; a field Slurm 22.05
prints as ``null`` (an unset time limit, say) becomes None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from whale_opt.slurm import gres
from whale_opt.slurm.hostlist import expand

INFINITE = 0xFFFFFFFE  # Slurm's INFINITE/NO_VAL sentinels, should a time limit carry one


ADMIN_HOLD = "JobHeldAdmin"


class SlurmDataError(ValueError):
    """A ``squeue``/``sinfo`` document the bridge cannot read."""


@dataclass(frozen=True)
class SlurmNode:
    """One node of ``sinfo --json``: its GPUs, CPUs, state and features.

    ``gres`` is what the node offers, ``used`` the GPU indices in use
    (``gres_used``). ``state`` is the base state (``idle``, ``mixed``,
    ``down``...), ``flags`` the state flags (``DRAIN``, ``NOT_RESPONDING``...).
    """

    name: str
    gres: tuple[gres.GresEntry, ...]
    used: tuple[int, ...]
    cpus: int
    alloc_cpus: int
    memory_mb: int
    state: str
    flags: tuple[str, ...]
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True)
class SlurmJob:
    """One job of ``squeue --json``.

    ``request`` is the GPU request per node (``tres_per_node``, raw text in
    ``tres_per_node``); ``per_job_gpus`` the GPUs asked per job (``--gpus``);
    ``held_gpus`` the indices held on each node of ``nodes`` (from
    ``gres_detail``, same order). Times are Unix seconds; ``time_limit_s``
    is None when unlimited.
    """

    id: str
    name: str
    state: str
    priority: int
    reason: str
    partition: tuple[str, ...]
    nodes: tuple[str, ...]
    node_count: int
    required_nodes: tuple[str, ...]
    tres_per_node: str
    request: tuple[gres.GresEntry, ...]
    per_job_gpus: int
    held_gpus: tuple[tuple[int, ...], ...]
    time_limit_s: int | None
    submit_time: int
    start_time: int
    cpus: int
    tenant: str
    qos: str
    comment: str
    features: str
    dependency: str
    requeue: bool
    array_pending: bool
    restarts: int

    @property
    def gpus_per_node(self) -> int:
        """GPUs asked on each node (0: none per node)."""
        return gres.gpu_count(self.request)

    @property
    def held(self) -> bool:
        """Pending with priority 0, for ``whale-opt slurm`` to place.

        An operator's hold (``scontrol hold``: reason ``JobHeldAdmin``) is not:
        such a job stays held until the operator lets it go.
        """
        return self.state == "PENDING" and self.priority == 0 and self.reason != ADMIN_HOLD


def _doc(document: Mapping[str, Any], key: str, command: str) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or not isinstance(document.get(key), list):
        raise SlurmDataError(f"{command} --json output has no '{key}' list")
    errors = document.get("errors") or []
    if errors:
        raise SlurmDataError(f"{command} --json reports errors: {errors}")
    return list(document[key])


def _int(record: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = record.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SlurmDataError(f"field {key!r} is {value!r}, expected a number")
    return int(value)


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None else str(value)


def _names(text: str) -> tuple[str, ...]:
    return tuple(item for item in text.split(",") if item)


def parse_nodes(document: Mapping[str, Any]) -> tuple[SlurmNode, ...]:
    """Every node of a ``sinfo --json`` document (one record per node name)."""
    out: dict[str, SlurmNode] = {}
    for record in _doc(document, "nodes", "sinfo"):
        name = _text(record, "name")
        if not name or name in out:
            continue
        try:
            offered = gres.parse_gres(_text(record, "gres"))
            used = gres.used_indices(gres.parse_gres(_text(record, "gres_used")))
        except gres.GresError as exc:
            raise SlurmDataError(f"node {name}: {exc}") from exc
        partitions = record.get("partitions") or []
        out[name] = SlurmNode(
            name=name,
            gres=offered,
            used=used,
            cpus=_int(record, "cpus"),
            alloc_cpus=_int(record, "alloc_cpus"),
            memory_mb=_int(record, "real_memory"),
            state=_text(record, "state").lower(),
            flags=tuple(str(flag).upper() for flag in record.get("state_flags") or []),
            features=_names(_text(record, "active_features") or _text(record, "features")),
            partitions=tuple(str(p) for p in partitions),
            reason=_text(record, "reason"),
        )
    return tuple(out.values())


def _job(record: Mapping[str, Any]) -> SlurmJob:
    job_id = str(_int(record, "job_id"))
    try:
        request = gres.parse_tres_gres(_text(record, "tres_per_node"))
        per_job = gres.gpu_count(gres.parse_tres_gres(_text(record, "tres_per_job")))
        details = record.get("gres_detail") or []
        detail = tuple(gres.used_indices(gres.parse_gres(str(item))) for item in details)
        nodes = tuple(expand(_text(record, "nodes")))
        required = tuple(expand(_text(record, "required_nodes")))
    except ValueError as exc:
        raise SlurmDataError(f"job {job_id}: {exc}") from exc
    limit = record.get("time_limit")
    if limit is not None and _int(record, "time_limit") >= INFINITE:
        limit = None
    tenant = _text(record, "account") or _text(record, "user_name") or "default"
    array_pending = bool(_text(record, "array_task_string")) and record.get("array_task_id") is None
    return SlurmJob(
        id=job_id,
        name=_text(record, "name"),
        state=_text(record, "job_state").upper(),
        priority=_int(record, "priority"),
        reason=_text(record, "state_reason"),
        partition=_names(_text(record, "partition")),
        nodes=nodes,
        node_count=max(1, _int(record, "node_count", 1)),
        required_nodes=required,
        tres_per_node=_text(record, "tres_per_node"),
        request=request,
        per_job_gpus=per_job,
        held_gpus=detail,
        time_limit_s=None if limit is None else 60 * _int(record, "time_limit"),
        submit_time=_int(record, "submit_time"),
        start_time=_int(record, "start_time"),
        cpus=_int(record, "cpus", 1),
        tenant=tenant,
        qos=_text(record, "qos"),
        comment=_text(record, "comment"),
        features=_text(record, "features"),
        dependency=_text(record, "dependency"),
        requeue=bool(record.get("requeue", False)),
        array_pending=array_pending,
        restarts=_int(record, "restart_cnt"),
    )


def parse_jobs(document: Mapping[str, Any]) -> tuple[SlurmJob, ...]:
    """Every job of a ``squeue --json`` document, finished ones included.

    (``squeue --json`` in 22.05 ignores ``-t`` and ``-j``: the caller filters.)
    """
    return tuple(_job(record) for record in _doc(document, "jobs", "squeue"))
