"""What the checker adds up over time: each job's hold on a node (:class:`Use`),
and the first moment a total goes over its limit (:func:`first_overload`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Use:
    """A job's hold on one node: GPUs (of the node's count, and of its tenant's
    quota), CPU, memory over [start, end)."""

    job: str
    tenant: str
    node: int
    gpus: float
    quota: float
    cpu: float
    memory_gb: float
    start: int
    end: int
    new: bool


def first_overload(
    uses: list[Use], amount: Callable[[Use], float], limit: float
) -> tuple[float, int, str] | None:
    """The first moment the total of ``amount`` exceeds ``limit`` while a new job is
    active: (level, time, the latest-started new job active then). Overloads made
    by running jobs alone are the instance's, not the decision's."""
    deltas: dict[int, float] = defaultdict(float)
    for use in uses:
        if use.end > use.start:
            deltas[use.start] += amount(use)
            deltas[use.end] -= amount(use)
    level = 0.0
    # Shares (thousandths of a GPU), CPUs and memory are floats: what ended leaves a
    # residue in the running sum (21.1 - 10.1 = 11.000000000000002), never a real
    # overload of a billionth.
    slack = 1e-9 * max(1.0, abs(limit))
    for time in sorted(deltas):
        level += deltas[time]
        if level <= limit + slack:
            continue
        news = [u for u in uses if u.new and u.start <= time < u.end and amount(u) > 0]
        if news:
            return level, time, max(news, key=lambda u: (u.start, u.job)).job
    return None
