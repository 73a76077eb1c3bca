"""The validators every record runs on construction, and the error they raise.

:class:`FieldError` names the field and the bad value; the helpers check one
value each. Frozen maps (MappingProxyType) are made picklable here.
"""

from __future__ import annotations

import copyreg
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal


# Records freeze their maps as MappingProxyType; this makes them picklable (pools
# travel to worker processes as they are, with no JSON round trip).
def _frozen_map(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda proxy: (_frozen_map, (dict(proxy),)))

MAX_SECONDS = 10**9
"""The longest time limit of a round, and of every time an instance file gives
(its schema's ranges; the README's "Ranges"): about 31.7 years."""

FROM_POLICY: Literal["policy"] = "policy"
"""A :class:`PriorityClass` whose ``max_wait_s`` is this takes :attr:`Policy.max_wait_s`."""


class FieldError(ValueError):
    """A record field holds a bad value.

    ``path`` is a JSON-path-like location (``nodes[3].gpus``) that callers
    extend as the error travels outwards; ``value`` is the offending value.
    """

    def __init__(self, path: str, value: Any, message: str) -> None:
        self.path = path
        self.value = value
        self.message = message
        super().__init__(self.__str__())

    def within(self, prefix: str) -> FieldError:
        """Return the same error located under ``prefix``."""
        path = (
            f"{prefix}.{self.path}"
            if self.path and not self.path.startswith("[")
            else (f"{prefix}{self.path}")
        )
        return FieldError(path, self.value, self.message)

    def __str__(self) -> str:
        return f"{self.path}: {self.message} (got {self.value!r})"


def _require(ok: bool, path: str, value: Any, message: str) -> None:
    if not ok:
        raise FieldError(path, value, message)


def _nonneg(path: str, value: float) -> None:
    _require(
        isinstance(value, int | float) and math.isfinite(value) and value >= 0,
        path,
        value,
        "must be a number >= 0",
    )


def _positive(path: str, value: float) -> None:
    _require(
        isinstance(value, int | float) and math.isfinite(value) and value > 0,
        path,
        value,
        "must be a number > 0",
    )


def _integer(path: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    """An integer (not a bool) >= ``minimum``; None too when ``optional``."""
    if optional and value is None:
        return
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        path,
        value,
        f"must be an integer >= {minimum}",
    )


def _max_wait(path: str, value: Any, *, from_policy: bool = False) -> None:
    """A wait ceiling: an integer >= 1, None (no ceiling), or "policy" where allowed."""
    if from_policy and value == FROM_POLICY:
        return
    also = ', or "policy"' if from_policy else ""
    _require(
        value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1),
        path,
        value,
        f"must be an integer >= 1 (seconds), null (no ceiling){also}",
    )


def _sequence(path: str, value: Any) -> tuple[Any, ...]:
    """``value``, a tuple or a list (a caller's natural choice), as a tuple."""
    if type(value) is tuple:
        return value
    _require(isinstance(value, list | tuple), path, value, "must be a list")
    return tuple(value)


def _pairs(path: str, value: Any, message: str) -> tuple[tuple[Any, Any], ...]:
    """``value``, a mapping or a list of (name, value) pairs, as pairs of a
    string and a value; ``message`` says what it must be."""
    _require(isinstance(value, Mapping | tuple | list), path, value, message)
    items = tuple(value.items()) if isinstance(value, Mapping) else value
    for item in items:
        _require(
            isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str),
            path,
            value,
            message,
        )
    return tuple(map(tuple, items))


def _ident(path: str, value: Any) -> None:
    _require(isinstance(value, str) and value != "", path, value, "must be a non-empty string")
