"""Shared by the converters: CSV rows with line numbers, typed cells, node ids
and GPU counts, ids that must be unique, racks.

Every problem in a source row is an :class:`~whale_opt.io.InputError` naming
the file, the line and the column, e.g.
``openb_pod_list.csv: line 7: num_gpu: must be an integer (got 'x')``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from whale_opt.convert.assumptions import Assumptions, GpuModel
from whale_opt.io import InputError, schema
from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim.trace import csv_records

MAX_NODE_GPUS: int = schema("instance")["properties"]["nodes"]["items"]["properties"]["gpus"][
    "maximum"
]
"""The most GPUs a node of an instance@1 file has (the published schema's limit)."""


def read_text(path: str | Path) -> str:
    """The file's text; unreadable or non-UTF-8 files are an InputError."""
    source = str(path)
    try:
        return Path(path).read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(source, f"byte {exc.start}", "is not UTF-8 text") from exc


class Row:
    """One CSV record: its cells by column name, and where it came from."""

    def __init__(self, source: str, line: int, cells: dict[str, str]) -> None:
        self.source = source
        self.line = line
        self.cells = cells

    def error(self, column: str, message: str) -> InputError:
        """An InputError naming this row's file, line and ``column``."""
        value = self.cells.get(column, "")
        return InputError(self.source, f"line {self.line}: {column}", f"{message} (got {value!r})")

    def text(self, column: str) -> str:
        """The cell, stripped (empty string when blank)."""
        return self.cells.get(column, "").strip()

    def number(self, column: str, minimum: float = 0.0) -> float:
        """The cell as a finite number >= ``minimum``."""
        try:
            value = float(self.text(column))
        except ValueError:
            raise self.error(column, "must be a number") from None
        if not math.isfinite(value) or value < minimum:
            raise self.error(column, f"must be a number >= {minimum:g}")
        return value

    def integer(self, column: str, minimum: int = 0) -> int:
        """The cell as a whole number >= ``minimum`` (``8`` or ``8.0``)."""
        try:
            value = float(self.text(column))
        except ValueError:
            raise self.error(column, "must be an integer") from None
        if not math.isfinite(value) or value != int(value) or value < minimum:
            raise self.error(column, f"must be an integer >= {minimum}")
        return int(value)


def csv_rows(
    path: str | Path, required: Sequence[str], header: Sequence[str] | None = None
) -> Iterator[Row]:
    """The rows of a CSV file, checked for the ``required`` columns.

    ``header`` names the columns of a file that has no header line. Cells
    and column names are stripped (Philly writes ``m0,2, 12GB``).
    """
    source = str(path)
    reader = csv.reader(io.StringIO(read_text(path)))
    records = csv_records(source, reader, reader)
    if header is None:
        first = next(records, None)
        if first is None:
            raise InputError(source, "(file)", "is empty: no header line")
        header = [name.strip() for name in first]
    missing = [name for name in required if name not in header]
    if missing:
        raise InputError(
            source, "line 1", f"missing column {missing[0]!r} (columns: {', '.join(header)})"
        )
    for cells in records:
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise InputError(
                source,
                f"line {reader.line_num}",
                f"must have {len(header)} comma-separated cells (got {len(cells)})",
            )
        yield Row(source, reader.line_num, dict(zip(header, cells, strict=True)))


class FirstSeen:
    """Where each id of a file was first read (``line 4``, ``[3]``), so that a
    repeat is an error naming both places."""

    def __init__(self, source: str, what: str) -> None:
        self.source = source
        self.what = what
        self.places: dict[str, str] = {}

    def add(self, value: str, place: str, where: str) -> str:
        """``value``, noted as read at ``place``; read before, an InputError at ``where``."""
        first = self.places.setdefault(value, place)
        if first != place:
            raise InputError(
                self.source, where, f"duplicate {self.what} {value!r} (first at {first})"
            )
        return value


def node_id(row: Row, column: str, seen: FirstSeen) -> str:
    """The node id in ``column``: a non-empty name without '/', not in ``seen`` yet."""
    value = row.text(column)
    if not value or "/" in value:
        raise row.error(column, "must be a non-empty name without '/'")
    return seen.add(value, f"line {row.line}", f"line {row.line}: {column}")


def node_gpus(row: Row, column: str) -> int:
    """The GPU count in ``column``: 0 (a machine without GPUs) to :data:`MAX_NODE_GPUS`."""
    gpus = row.integer(column)
    if gpus > MAX_NODE_GPUS:
        raise row.error(
            column, f"must be at most {MAX_NODE_GPUS} GPUs (an instance@1 node's limit)"
        )
    return gpus


def model_of(row: Row, column: str, name: str, assumptions: Assumptions) -> GpuModel:
    """The assumptions for GPU model ``name`` of ``row``, or a clear error."""
    try:
        return assumptions.model(name)
    except KeyError:
        raise row.error(
            column, f"unknown GPU model: add [gpu_models.{name}] to an assumptions file"
        ) from None


def cluster(
    name: str, machines: Sequence[tuple[str, GpuModel, int, float, float]], assumptions: Assumptions
) -> Instance:
    """An instance (empty queue and running) of ``machines``.

    Each machine is (id, model, GPUs, CPU cores, host memory GB). Racks hold
    ``assumptions.rack_size`` nodes of one GPU type, in file order, so a
    multi-node gang can find whole nodes of one type in one rack.
    """
    types: dict[str, GpuType] = {}
    per_type: dict[str, int] = {}
    nodes = []
    for node_id, model, gpus, cpu, memory_gb in machines:
        known = types.setdefault(model.type, model.gpu_type)
        if known != model.gpu_type:
            raise ValueError(
                f"GPU type {model.type!r} is assumed twice with different memory or speed"
            )
        position = per_type.get(model.type, 0)
        per_type[model.type] = position + 1
        nodes.append(
            Node(
                id=node_id,
                gpu_type=model.type,
                gpu_count=gpus,
                nvlink=model.layout(gpus),
                cpu=cpu,
                memory_gb=memory_gb,
                rack=f"{model.type}-r{position // assumptions.rack_size:03d}",
            )
        )
    return Instance(name=name, gpu_types=types, nodes=tuple(nodes))
