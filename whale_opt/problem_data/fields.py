"""The validators every record runs on construction, and the error they raise.

:class:`FieldError` names the field and the bad value; the helpers check one
value each. Frozen maps (MappingProxyType) are made picklable here.
"""

from __future__ import annotations

import copyreg
import math
from types import MappingProxyType
from typing import Any, Literal


# Records freeze their maps as MappingProxyType; this makes them picklable (pools
# travel to worker processes as they are, with no JSON round trip).
def _frozen_map(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda proxy: (_frozen_map, (dict(proxy),)))

MAX_SECONDS = 10**9
"""The longest time a field may give, in seconds (about 31.7 years): durations,
waits, prices in seconds, time limits; times relative to ``now`` lie within
this many seconds of it. Beyond any real cluster, and small enough that every
quantity a round derives stays finite and each one fits CP-SAT's 64-bit
integers (the README's "Ranges")."""

MAX_AMOUNT = 10**9
"""The largest CPU count, memory in GB, weight, aging rate or GPU-second price a
field may give (for the same reason as :data:`MAX_SECONDS`)."""

SPEEDS = (0.001, 1000)
"""The range of a GPU type's speed, relative to the 1.0 reference GPU."""

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


def _nonneg(path: str, value: float, maximum: float | None = None) -> None:
    """A finite number >= 0 (and at most ``maximum`` when given)."""
    _number(path, value, 0, maximum, ">=")


def _positive(path: str, value: float, maximum: float | None = None) -> None:
    """A finite number > 0 (and at most ``maximum`` when given)."""
    _number(path, value, 0, maximum, ">")


def _number(path: str, value: Any, low: float, high: float | None, above: str) -> None:
    """A finite number (not a bool) ``above`` (">=" or ">") ``low``, and at most
    ``high`` when given."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value >= low if above == ">=" else value > low)
    if high is None:
        _require(ok, path, value, f"must be a number {above} {low}")
    else:
        _require(ok and value <= high, path, value, f"must be a number {above} {low} and <= {high}")


def _integer(
    path: str, value: Any, minimum: int, *, optional: bool = False, maximum: int | None = None
) -> None:
    """An integer (not a bool) >= ``minimum`` (and at most ``maximum`` when given);
    None too when ``optional``."""
    if optional and value is None:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if maximum is None:
        _require(ok, path, value, f"must be an integer >= {minimum}")
    else:
        _require(
            ok and value <= maximum,
            path,
            value,
            f"must be an integer >= {minimum} and <= {maximum}",
        )


def _max_wait(path: str, value: Any, *, from_policy: bool = False) -> None:
    """A wait ceiling: an integer >= 1, None (no ceiling), or "policy" where allowed."""
    if from_policy and value == FROM_POLICY:
        return
    also = ', or "policy"' if from_policy else ""
    _require(
        value is None
        or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SECONDS),
        path,
        value,
        f"must be an integer >= 1 and <= {MAX_SECONDS} (seconds), null (no ceiling){also}",
    )


def _ident(path: str, value: Any) -> None:
    _require(isinstance(value, str) and value != "", path, value, "must be a non-empty string")
