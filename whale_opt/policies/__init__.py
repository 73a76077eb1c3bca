"""Policies behind one Protocol, chosen by name from :data:`REGISTRY`."""

from __future__ import annotations

from collections.abc import Callable

from whale_opt.policies.base import SchedulingPolicy as SchedulingPolicy
from whale_opt.policies.best_fit import BestFitPolicy as BestFitPolicy
from whale_opt.policies.fifo import FifoPolicy as FifoPolicy
from whale_opt.policies.frag_aware import FragAwarePolicy as FragAwarePolicy
from whale_opt.policies.hybrid import HybridPolicy as HybridPolicy
from whale_opt.policies.las import LasPolicy as LasPolicy
from whale_opt.policies.ordered import OrderedPolicy as OrderedPolicy
from whale_opt.policies.sjf import SjfPolicy as SjfPolicy
from whale_opt.policies.wspt import WsptPolicy as WsptPolicy


def _cpsat(preset: str | None = None) -> SchedulingPolicy:
    # Imported here: the CP-SAT model imports the policies' shared code.
    from whale_opt.cpsat.model import CpSatPolicy

    return CpSatPolicy(preset)


REGISTRY: dict[str, Callable[..., SchedulingPolicy]] = {
    "fifo": FifoPolicy,
    "sjf": SjfPolicy,
    "wspt": WsptPolicy,
    "greedy": WsptPolicy,  # alias: the greedy is WSPT
    "best-fit": BestFitPolicy,
    "frag-aware": FragAwarePolicy,
    "las": LasPolicy,
    "hybrid": HybridPolicy,
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
