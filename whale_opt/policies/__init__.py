"""Policies behind one Protocol, chosen by name from :data:`REGISTRY`."""

from __future__ import annotations

from collections.abc import Callable

from whale_opt.policies.base import SchedulingPolicy as SchedulingPolicy
from whale_opt.policies.wspt import WsptPolicy as WsptPolicy

REGISTRY: dict[str, Callable[..., SchedulingPolicy]] = {
    "wspt": WsptPolicy,
    "greedy": WsptPolicy,
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
    return factory(preset=preset) if preset is not None else factory()
