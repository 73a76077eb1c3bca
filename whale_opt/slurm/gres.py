"""GRES strings as Slurm 22.05 prints them, parsed without calling Slurm.

Three places carry GPUs:

- a node's ``gres`` (``sinfo --json``): ``gpu:a100:8``, or, in the indexed
  layout, ``gpu:g0:1,gpu:g1:1,...,gpu:g7:1`` (one GRES type per GPU index);
- what is in use, per node (``gres_used``) or per job and node
  (``gres_detail``): ``gpu:a100:4(IDX:0-3)``, ``gpu:g2:1(IDX:2)``,
  ``gpu:g0:0(IDX:N/A)``, ``gpu:g0:0(IDX:)``;
- a job's request per node (``tres_per_node``): ``gres:gpu:2``,
  ``gres:gpu:a100:2``, ``gres:gpu:g2:1,gres:gpu:g5:1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GPU = "gpu"
_INDEX_TYPE = re.compile(r"^g(\d+)$")
_ENTRY = re.compile(r"^(?P<spec>[^()]+?)(?:\((?P<extra>[^()]*)\))?$")


class GresError(ValueError):
    """A GRES string that is not in the form Slurm prints."""


@dataclass(frozen=True)
class GresEntry:
    """One ``name[:type]:count[(IDX:...)]`` item; ``indices`` only when printed."""

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] | None = None


def index_type(index: int) -> str:
    """The GRES type that names GPU ``index`` in the indexed layout (``g3``)."""
    return f"g{index}"


def type_index(gres_type: str | None) -> int | None:
    """The GPU index an indexed-layout type names (``g3`` -> 3), else None."""
    if gres_type is None:
        return None
    match = _INDEX_TYPE.match(gres_type)
    return int(match[1]) if match else None


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``IDX:0-1,4`` keeps its commas)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def parse_indices(text: str) -> tuple[int, ...]:
    """``0-3,5`` -> (0, 1, 2, 3, 5); ``""`` and ``N/A`` -> ()."""
    text = text.strip()
    if text in ("", "N/A"):
        return ()
    out: list[int] = []
    for item in text.split(","):
        low, sep, high = item.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise GresError(f"bad GPU index range {item!r} in {text!r}")
        out.extend(range(int(low), int(high if sep else low) + 1))
    return tuple(out)


def _count(text: str, whole: str) -> int:
    if not text.isdigit():
        raise GresError(f"bad GRES count {text!r} in {whole!r}")
    return int(text)


def parse_gres(text: str | None) -> tuple[GresEntry, ...]:
    """Every entry of a GRES string; ``None``, ``""`` and ``(null)`` -> ()."""
    if text is None or text.strip() in ("", "(null)", "N/A"):
        return ()
    entries = []
    for part in _split_top(text):
        match = _ENTRY.match(part)
        if match is None:
            raise GresError(f"bad GRES entry {part!r} in {text!r}")
        fields = match["spec"].split(":")
        indices = None
        extra = match["extra"]
        if extra is not None:
            for item in extra.split(")("):
                key, _, value = item.partition(":")
                if key == "IDX":
                    indices = parse_indices(value)
        if len(fields) == 1:
            entries.append(GresEntry(fields[0], None, 1, indices))
        elif len(fields) == 2:
            if fields[1].isdigit():
                entries.append(GresEntry(fields[0], None, int(fields[1]), indices))
            else:  # name:type, count 1 (as Slurm reads it)
                entries.append(GresEntry(fields[0], fields[1], 1, indices))
        elif len(fields) == 3:
            entries.append(GresEntry(fields[0], fields[1], _count(fields[2], text), indices))
        else:
            raise GresError(f"bad GRES entry {part!r} in {text!r}")
    return tuple(entries)


def parse_tres_gres(text: str | None) -> tuple[GresEntry, ...]:
    """The GRES entries of a ``tres_per_*`` string (``gres:gpu:2,gres:gpu:g1:1``).

    Non-GRES TRES (``license:...``) are skipped; both ``gres:`` and
    ``gres/`` prefixes are read. ``gres:`` alone (a cleared request) is empty.
    """
    if text is None:
        return ()
    kept = []
    for part in _split_top(text):
        for prefix in ("gres:", "gres/"):
            if part.startswith(prefix):
                rest = part[len(prefix) :]
                if rest:
                    kept.append(rest)
                break
    return parse_gres(",".join(kept)) if kept else ()


def gpus(entries: tuple[GresEntry, ...]) -> tuple[GresEntry, ...]:
    """Only the ``gpu`` entries."""
    return tuple(entry for entry in entries if entry.name == GPU)


def gpu_count(entries: tuple[GresEntry, ...]) -> int:
    """Total GPUs of ``entries``."""
    return sum(entry.count for entry in gpus(entries))


def used_indices(entries: tuple[GresEntry, ...]) -> tuple[int, ...]:
    """The GPU indices ``entries`` (``gres_used``/``gres_detail``) say are held, sorted.

    An indexed-layout entry without an IDX list (never seen, but cheap to
    read) counts as its type's index when its count is positive.
    """
    held: set[int] = set()
    for entry in gpus(entries):
        if entry.indices is not None:
            held.update(entry.indices)
        elif entry.count > 0 and (index := type_index(entry.type)) is not None:
            held.add(index)
    return tuple(sorted(held))


def indexed_request(indices: tuple[int, ...] | list[int]) -> str:
    """The ``TresPerNode`` value that asks for exactly ``indices`` in the indexed layout."""
    return ",".join(f"gres:{GPU}:{index_type(k)}:1" for k in sorted(indices))


def requested_indices(entries: tuple[GresEntry, ...]) -> tuple[int, ...] | None:
    """The indices an indexed-layout request names (``g2:1,g5:1`` -> (2, 5)).

    None when any GPU entry is untyped or not an index type, or asks for more
    than one GPU of an index type.
    """
    out = []
    for entry in gpus(entries):
        if entry.count == 0:
            continue  # left over from an earlier request: Slurm keeps zero counts
        index = type_index(entry.type)
        if index is None or entry.count != 1:
            return None
        out.append(index)
    return tuple(sorted(out)) if out else None
