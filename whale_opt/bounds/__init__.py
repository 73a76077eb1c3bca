"""Lower bounds on the decision@1 objective of a round.

- :mod:`whale_opt.bounds.analytic`: the earliest-end and the time-indexed
  transportation (flow) bounds, cheap, every decision reports them;
- :mod:`whale_opt.bounds.lagrangian`: each job whole and non-preemptive
  against prices on capacity, stronger where jobs contend for the same
  nodes, raised within a time budget;
- :mod:`whale_opt.bounds.capacity`: free capacity over time, and the pieces
  of a size it holds.
"""

from whale_opt.bounds.analytic import (
    CHEAP_ABOVE,
    EarliestStarts,
    earliest_end_bound,
    earliest_starts,
    earliest_times,
    flow_bound,
    lower_bound,
    reported_bound,
    shape_key,
    trivial_bound,
    without_preemptible,
)
from whale_opt.bounds.capacity import Capacity, slots
from whale_opt.bounds.lagrangian import Lagrangian, lagrangian_bound, solve_lagrangian

__all__ = [
    "CHEAP_ABOVE",
    "Capacity",
    "EarliestStarts",
    "Lagrangian",
    "earliest_end_bound",
    "earliest_starts",
    "earliest_times",
    "flow_bound",
    "lagrangian_bound",
    "lower_bound",
    "reported_bound",
    "shape_key",
    "slots",
    "solve_lagrangian",
    "trivial_bound",
    "without_preemptible",
]
