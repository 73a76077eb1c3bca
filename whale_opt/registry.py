"""Policy names -> factories: how a round, the simulator and the CLI find a policy.

Every built-in policy is here under its name. A user registers their own with
:func:`register_policy`; from then on it is a name like any other, in
:func:`whale_opt.solve.solve`, the round API (:class:`whale_opt.scheduler.Scheduler`)
and the simulator::

    from whale_opt.registry import register_policy

    class MyPolicy:
        name = "mine"
        def decide(self, instance, options):  # -> whale_opt.Decision
            ...

    register_policy("mine", MyPolicy)

A factory is called with no argument, or with ``preset=`` when it was
registered with ``takes_preset=True`` (as CP-SAT is). Pools of a large round are
solved in worker processes that build their policy by name: a policy registered
at run time reaches them only where the worker imports the module that
registers it (or when the pools run in this process).
"""

from __future__ import annotations

from collections.abc import Callable

from whale_opt.cpsat.model import CpSatPolicy
from whale_opt.policies import (
    BestFitPolicy,
    FifoPolicy,
    FragAwarePolicy,
    HybridPolicy,
    LasPolicy,
    SjfPolicy,
    WsptPolicy,
)
from whale_opt.policies.learned import LearnedPolicy
from whale_opt.policies.protocol import SchedulingPolicy

REGISTRY: dict[str, Callable[..., SchedulingPolicy]] = {
    "fifo": FifoPolicy,
    "sjf": SjfPolicy,
    "wspt": WsptPolicy,
    "greedy": WsptPolicy,  # alias: the greedy is WSPT
    "best-fit": BestFitPolicy,
    "frag-aware": FragAwarePolicy,
    "las": LasPolicy,
    "hybrid": HybridPolicy,
    "cpsat": CpSatPolicy,
    # a trained network (whale-opt train); wspt decides when it cannot: see policies/learned.py
    "learned": LearnedPolicy,
}
_TAKES_PRESET = {"cpsat"}


def register_policy(
    name: str, factory: Callable[..., SchedulingPolicy], *, takes_preset: bool = False
) -> None:
    """Make ``factory`` available as policy ``name`` (replacing one of that name)."""
    if not name or not isinstance(name, str):
        raise ValueError(f"a policy name is a non-empty string, not {name!r}")
    REGISTRY[name] = factory
    if takes_preset:
        _TAKES_PRESET.add(name)
    else:
        _TAKES_PRESET.discard(name)


def policy_names() -> tuple[str, ...]:
    """The registered names, sorted."""
    return tuple(sorted(REGISTRY))


def get_policy(name: str, *, preset: str | None = None) -> SchedulingPolicy:
    """A fresh policy by registry name; ValueError lists the known names.

    ``preset`` goes to policies that take parameter presets (CP-SAT).
    """
    try:
        factory = REGISTRY[name]
    except KeyError:
        known = ", ".join(policy_names())
        raise ValueError(f"unknown policy {name!r}; choose from {known}") from None
    if name in _TAKES_PRESET:
        return factory(preset=preset)
    return factory()  # heuristics take no parameter presets
