"""The record of one reason a queued job is not started, and the kinds there are.

:mod:`~whale_opt.explain.reasons` builds them; import them from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REASON_KINDS = (
    "ceiling",
    "no-hardware",
    "draining",
    "quota",
    "guarantee",
    "busy",
    "scattered",
    "share",
    "outranked",
    "faster-later",
    "price",
    "preference",
)


@dataclass(frozen=True)
class Reason:
    """One reason a job is not started: ``kind`` (REASON_KINDS), words, facts."""

    kind: str
    message: str
    facts: Mapping[str, Any] = field(default_factory=dict)
