"""Slurm hostlists (``n[1-3,5]``, ``gpu[01-04],login1``) without calling Slurm.

``squeue --json`` reports a job's nodes as a compressed hostlist; the bridge
expands it to match ``gres_detail``, which has one entry per node in the
same order. Only what Slurm prints is parsed: one bracket group per name,
ranges with zero padding kept (``gpu[08-10]`` -> gpu08, gpu09, gpu10).
"""

from __future__ import annotations

import re

_GROUP = re.compile(r"^(?P<prefix>[^\[\],]*)\[(?P<ranges>[^\]]*)\](?P<suffix>[^\[\],]*)$")


class HostlistError(ValueError):
    """A hostlist string that is not in Slurm's format."""


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {text!r}")
    parts.append("".join(current))
    return [part for part in parts if part]


def _expand_ranges(ranges: str, text: str) -> list[str]:
    out: list[str] = []
    for item in ranges.split(","):
        low, sep, high = item.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise HostlistError(f"bad range {item!r} in hostlist {text!r}")
        if not sep:
            out.append(low)
            continue
        width = len(low) if low.startswith("0") else 0
        if int(high) < int(low):
            raise HostlistError(f"descending range {item!r} in hostlist {text!r}")
        out.extend(str(k).zfill(width) for k in range(int(low), int(high) + 1))
    return out


def expand(hostlist: str) -> list[str]:
    """The host names of ``hostlist``, in order (``""`` -> ``[]``).

    >>> expand("n[1-3,5],login")
    ['n1', 'n2', 'n3', 'n5', 'login']
    """
    hosts: list[str] = []
    for part in _split_top(hostlist.strip()):
        match = _GROUP.match(part)
        if match is None:
            if "[" in part or "]" in part:
                raise HostlistError(f"unsupported hostlist part {part!r} in {hostlist!r}")
            hosts.append(part)
            continue
        for number in _expand_ranges(match["ranges"], hostlist):
            hosts.append(f"{match['prefix']}{number}{match['suffix']}")
    return hosts


def join(hosts: list[str] | tuple[str, ...]) -> str:
    """A plain comma-separated node list, as ``scontrol update NodeList=`` takes."""
    return ",".join(hosts)
