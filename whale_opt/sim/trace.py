"""Job traces and failure traces: CSV or JSON lines, read and written (TRACES.md).

Reading goes line -> typed fields -> :class:`TraceJob` (which checks itself,
through the same :class:`~whale_opt.problem_data.QueuedJob` rules as an
instance file). Every failure is one :class:`~whale_opt.io.InputError` naming
the file, the line and the field; given the cluster, so does a name the
cluster lacks (a GPU type, a priority class, an outage's node or GPU). The
format follows the file's suffix:
``.csv``, or ``.jsonl`` / ``.ndjson`` / ``.json`` (one JSON object a line).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

from whale_opt.io import INT64_MAX, InputError, parse_json, write_text
from whale_opt.problem_data import DEFAULT_CLASS, MAX_SECONDS, FieldError, Instance, QueuedJob
from whale_opt.sim.config import Outage

T = TypeVar("T")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: its request, when it arrives, how long it runs.

    ``duration_s`` is the *estimate* the scheduler sees (seconds on a GPU of
    speed 1.0); ``actual_duration_s`` is how long it really runs there. Either
    may be missing (the simulator derives it with seeded noise), not both
    unless ``duration_by_type_s`` (estimates per GPU type) is given.

    ``priority_class`` names one of the cluster's priority classes;
    ``checkpoint_s`` is the restore time each restart after an interruption
    pays. ``zone``, ``preferred_gpu_types`` and ``prefer_nvlink`` are soft
    preferences, as in instance@1; ``gpu_milli`` a share of one GPU and
    ``gpus`` 0 a CPU-only job, as in instance@1.
    """

    id: str
    submit_s: int
    gpus: int
    duration_s: int | None = None
    actual_duration_s: int | None = None
    duration_by_type_s: tuple[tuple[str, int], ...] = ()
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: float = 0.0
    cpu: float = 0.0
    memory_gb: float = 0.0
    weight: float = 1.0
    tenant: str = "default"
    topology: str = "nvlink"
    preemptible: bool = True
    zone: str | None = None
    priority_class: str = DEFAULT_CLASS
    checkpoint_s: int = 0
    preferred_gpu_types: tuple[str, ...] = ()
    prefer_nvlink: bool = False
    gpu_milli: int = 1000

    def __post_init__(self) -> None:
        if not (isinstance(self.submit_s, int) and self.submit_s >= 0):
            raise FieldError("submit_s", self.submit_s, "must be an integer >= 0")
        if self.actual_duration_s is not None and not (
            isinstance(self.actual_duration_s, int) and self.actual_duration_s >= 1
        ):
            raise FieldError("actual_duration_s", self.actual_duration_s, "must be an int >= 1")
        if not (
            isinstance(self.checkpoint_s, int)
            and not isinstance(self.checkpoint_s, bool)
            and self.checkpoint_s >= 0
        ):
            raise FieldError("checkpoint_s", self.checkpoint_s, "must be an integer >= 0")
        if (
            self.duration_s is None
            and self.actual_duration_s is None
            and not self.duration_by_type_s
        ):
            raise FieldError(
                "duration_s", None, "give duration_s, actual_duration_s or duration_by_type_s"
            )
        self.queued(self.duration_s or self.actual_duration_s)  # the request's own rules

    @classmethod
    def of(cls, job: QueuedJob, submit_s: int, actual_duration_s: int | None = None) -> TraceJob:
        """Queued job ``job``'s request arriving at ``submit_s`` (its estimate as
        ``duration_s``; the inverse of :meth:`queued`)."""
        return cls(
            submit_s=submit_s,
            gpus=job.gpu_count,
            duration_s=job.duration_s,
            actual_duration_s=actual_duration_s,
            **{name: getattr(job, name) for name in _REQUEST},
        )

    def check_on(self, cluster: Instance) -> None:
        """That the names the job uses are ``cluster``'s: its GPU types (allowed,
        preferred, timed) and its priority class (:meth:`Instance.check_job`).

        Raises
        ------
        FieldError
            Naming the field and the first name the cluster lacks.
        """
        cluster.check_job(self.queued(self.duration_s or self.actual_duration_s))

    def queued(self, estimate_s: int | None) -> QueuedJob:
        """The job as the scheduler sees it, with estimated duration ``estimate_s``."""
        return QueuedJob(
            gpu_count=self.gpus,
            duration_s=estimate_s,
            submitted_at=self.submit_s,
            **{name: getattr(self, name) for name in _REQUEST},
        )


# What a trace job and a queued job both carry, under the same names.
_REQUEST = (
    "id",
    "tenant",
    "gpu_types",
    "min_gpu_memory_gb",
    "cpu",
    "memory_gb",
    "weight",
    "topology",
    "preemptible",
    "zone",
    "duration_by_type_s",
    "priority_class",
    "preferred_gpu_types",
    "prefer_nvlink",
    "gpu_milli",
)


# -- field types: each takes a JSON value or a CSV cell --------------------------


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _seconds(value: Any) -> int:
    """A number of seconds, at most :data:`~whale_opt.problem_data.MAX_SECONDS` (as in
    instance files; a time in milliseconds is the likely slip); fractions round up."""
    seconds = _whole(math.ceil(_number(value)))
    if seconds > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS} s, about 31.7 years (milliseconds?)")
    return seconds


def _number(value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError("must be a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("must be a number")
    return float(value)


def _count(value: Any) -> int:
    number = _number(value)
    if number != int(number):
        raise ValueError("must be a whole number")
    return _whole(int(number))


def _whole(number: int) -> int:
    """``number``, if the solvers' 64-bit integers hold it (as in instance files)."""
    if abs(number) > INT64_MAX:
        raise ValueError(f"must be within the 64-bit range, at most {INT64_MAX} in size")
    return number


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ValueError("must be true or false")


def _names(value: Any) -> tuple[str, ...]:
    items = value.split("|") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(s, str) and s for s in items):
        raise ValueError("must be a list of names (in CSV: A100-80G|H100-80G)")
    return tuple(items)


def _by_type(value: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(value, str):
        pairs = [part.partition("=") for part in value.split("|")]
        if not all(sep and name for name, sep, _ in pairs):
            raise ValueError("must be type=seconds pairs (in CSV: A100-80G=3600|V100-32G=8000)")
        value = {name: seconds for name, _, seconds in pairs}
    if not isinstance(value, Mapping):
        raise ValueError("must be an object of GPU type -> seconds")
    return tuple(sorted((str(name), _seconds(seconds)) for name, seconds in value.items()))


JOB_FIELDS: dict[str, Callable[[Any], Any]] = {
    "id": _text,
    "submit_s": _seconds,
    "gpus": _count,
    "duration_s": _seconds,
    "actual_duration_s": _seconds,
    "duration_by_type_s": _by_type,
    "gpu_types": _names,
    "min_gpu_memory_gb": _number,
    "cpu": _number,
    "memory_gb": _number,
    "weight": _number,
    "tenant": _text,
    "topology": _text,
    "preemptible": _flag,
    "zone": _text,
    "priority_class": _text,
    "checkpoint_s": _seconds,
    "preferred_gpu_types": _names,
    "prefer_nvlink": _flag,
    "gpu_milli": _count,
}
OUTAGE_FIELDS: dict[str, Callable[[Any], Any]] = {
    "node": _text,
    "at_s": _seconds,
    "repair_s": _seconds,
    "gpu": _count,
    "kind": _text,
}


# -- reading ------------------------------------------------------------------------


def trace_format(path: str | Path) -> str:
    """``"csv"`` or ``"jsonl"``, by the suffix of ``path``; any other is an InputError."""
    suffix = Path(path).suffix.lower()
    if suffix in JSON_SUFFIXES:
        return "jsonl"
    if suffix != ".csv":
        raise InputError(
            str(path), "(file)", f"unknown trace format {suffix!r}; use .csv or .jsonl"
        )
    return "csv"


class CsvLines(Protocol):
    """A ``csv.reader``: the number of source lines it has read."""

    @property
    def line_num(self) -> int: ...


def csv_records(source: str, records: Iterable[T], reader: CsvLines) -> Iterator[T]:
    """``records`` as read by ``reader``; malformed CSV (a bare carriage return
    in an unquoted cell, say) is an InputError naming the file and the line."""
    try:
        yield from records
    except csv.Error as exc:
        reason = str(exc).partition(" - ")[0]  # without Python's hint about open()
        raise InputError(source, f"line {reader.line_num}", f"is not valid CSV: {reason}") from exc


def _lines(path: Path, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, raw record) for each record of a CSV or JSON-lines file."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(source, f"byte {exc.start}", "is not UTF-8 text") from exc
    if trace_format(path) == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            raw = parse_json(source, line, number)
            if not isinstance(raw, dict):
                raise InputError(source, f"line {number}", "must be one JSON object")
            yield number, {k: v for k, v in raw.items() if v is not None}
    else:
        reader = csv.DictReader(io.StringIO(text), restkey="\0extra")
        # reader.reader: a DictReader's own line_num lags behind on an error
        for row in csv_records(source, reader, reader.reader):
            number = reader.line_num
            if "\0extra" in row or None in row.values():
                width = len(reader.fieldnames or ())
                raise InputError(
                    source, f"line {number}", f"must have {width} comma-separated cells"
                )
            yield number, {k.strip(): v.strip() for k, v in row.items() if v and v.strip()}


def _record(
    source: str,
    number: int,
    raw: dict[str, Any],
    fields: Mapping[str, Callable[[Any], Any]],
    make: Callable[..., T],
) -> T:
    """Typed fields, then the record; any problem names file, line and field."""
    typed: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(source, f"line {number}", f"unknown field {name!r}{hint}")
        try:
            typed[name] = fields[name](value)
        except ValueError as exc:
            raise InputError(source, f"line {number}: {name}", f"{exc} (got {value!r})") from exc
    try:
        return make(**typed)
    except TypeError as exc:  # a required field is missing
        missing = [n for n in fields if n not in typed and f"'{n}'" in str(exc)]
        field = missing[0] if missing else "(record)"
        raise InputError(source, f"line {number}: {field}", "is required") from exc
    except FieldError as exc:
        raise _on_line(source, number, exc) from exc


def _on_line(source: str, number: int, exc: FieldError) -> InputError:
    return InputError(source, f"line {number}: {exc.path}", f"{exc.message} (got {exc.value!r})")


def _fits(source: str, number: int, check: Callable[[Instance], None], cluster: Instance) -> None:
    """Run ``check(cluster)``; its FieldError becomes an InputError naming file and line."""
    try:
        check(cluster)
    except FieldError as exc:
        raise _on_line(source, number, exc) from exc


def read_trace(path: str | Path, cluster: Instance | None = None) -> tuple[TraceJob, ...]:
    """The jobs of a trace file, in file order; :class:`InputError` on any problem.

    With ``cluster``, a job naming a GPU type or priority class the cluster
    lacks is one too (:meth:`TraceJob.check_on`), with its line.
    """
    source = str(path)
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for number, raw in _lines(Path(path), source):
        job = _record(source, number, raw, JOB_FIELDS, TraceJob)
        if cluster is not None:
            _fits(source, number, job.check_on, cluster)
        if job.id in seen:
            raise InputError(
                source,
                f"line {number}: id",
                f"duplicate job id {job.id!r} (first on line {seen[job.id]})",
            )
        seen[job.id] = number
        jobs.append(job)
    if not jobs:
        raise InputError(source, "(file)", "has no jobs")
    return tuple(jobs)


def read_outages(path: str | Path, cluster: Instance | None = None) -> tuple[Outage, ...]:
    """The outages of a failure-trace file (fields node, at_s, repair_s, gpu, kind).

    With ``cluster``, an outage naming a node or GPU the cluster lacks is an
    :class:`InputError` with its line (:meth:`Outage.check_on`).
    """
    source = str(path)
    outages = []
    for number, raw in _lines(Path(path), source):
        outage = _record(source, number, raw, OUTAGE_FIELDS, Outage)
        if cluster is not None:
            _fits(source, number, outage.check_on, cluster)
        outages.append(outage)
    return tuple(outages)


# -- writing ------------------------------------------------------------------------


def _job_dict(job: TraceJob) -> dict[str, Any]:
    """The non-default fields of ``job``, as JSON values."""
    out: dict[str, Any] = {"id": job.id, "submit_s": job.submit_s, "gpus": job.gpus}
    for spec in fields(TraceJob):
        value = getattr(job, spec.name)
        if spec.name in out or value is None or value == spec.default:
            continue
        if spec.name == "duration_by_type_s":
            value = dict(value)
        elif spec.name in ("gpu_types", "preferred_gpu_types"):
            value = list(value)
        out[spec.name] = value
    return out


def _csv_cell(value: Any) -> str:
    if isinstance(value, dict):
        return "|".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return "|".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_trace(path: str | Path, jobs: tuple[TraceJob, ...] | list[TraceJob]) -> None:
    """Write ``jobs`` as CSV or JSON lines, following the suffix of ``path``.

    Atomically, as :func:`~whale_opt.io.write_json`: on any failure the target
    is untouched and no temp file is left.
    """
    target = Path(path)
    rows = [_job_dict(job) for job in jobs]
    if trace_format(target) == "jsonl":
        write_text(target, "".join(json.dumps(row) + "\n" for row in rows))
        return
    columns = [name for name in JOB_FIELDS if any(name in row for row in rows)]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(row[name]) if name in row else "" for name in columns])
    write_text(target, buffer.getvalue())
