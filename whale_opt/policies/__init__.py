"""Policies behind one Protocol, chosen by name from :data:`REGISTRY`."""

from __future__ import annotations

from collections.abc import Callable

from whale_opt.policies.base import SchedulingPolicy as SchedulingPolicy
from whale_opt.policies.wspt import WsptPolicy as WsptPolicy


def _cpsat(preset: str | None = None) -> SchedulingPolicy:
    # Imported here: the CP-SAT model imports the policies' shared code.
    from whale_opt.cpsat.model import CpSatPolicy

    return CpSatPolicy(preset)


REGISTRY: dict[str, Callable[..., SchedulingPolicy]] = {
    "wspt": WsptPolicy,
    "greedy": WsptPolicy,
    "cpsat": _cpsat,
}


def get_policy(name: str, *, preset: str | None = None) -> SchedulingPolicy:
    """A fresh policy by registry name; ValueError lists the known names.

    ``preset`` goes to policies that take parameter presets (CP-SAT).
    """
    try:
        factory = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown policy {name!r}; choose from {known}") from None
    if name == "cpsat":
        return factory(preset=preset)
    return factory()  # heuristics take no parameter presets
