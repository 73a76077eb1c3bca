"""The reward's bookkeeping: weight x time in the system, accrued over a run.

The cost of a run up to time t is

    C(t) = sum over jobs arrived by t of weight x (min(end, t) - submit)

(``end``: the job's completion, if any). Between two rounds the agent is
charged C(now) - C(previous round), divided by the trace's total weight, so
an episode in which every job completes returns exactly

    -sum(weight x JCT) / sum(weight)

the ``weighted_jct_s`` of :func:`whale_opt.sim.metrics.summarize` for the same
run. :class:`WaitMeter` keeps C(t) from the arrivals and completions each
round reports (:class:`~whale_opt.sim.Changes`), and sums it afresh over the
record once the run is over.
"""

from __future__ import annotations

from collections.abc import Mapping

from whale_opt.sim import Changes
from whale_opt.sim.jobs import JobRun


class WaitMeter:
    """C(t) of one run (see the module docstring), kept as rounds go by.

    Parameters
    ----------
    jobs
        The run's jobs (:attr:`whale_opt.sim.EventLoop.jobs`), read, not changed.
    """

    def __init__(self, jobs: Mapping[str, JobRun]) -> None:
        self.jobs = jobs
        self.total_weight = sum(run.trace.weight for run in jobs.values())
        self.done = 0.0  # sum of weight x JCT over completed jobs
        self.active_weight = 0.0  # jobs arrived and not completed: sum of weights
        self.active_submit = 0.0  # ... and of weight x submit time

    def update(self, changes: Changes) -> None:
        """Count the arrivals and completions since the previous round."""
        for job_id in changes.arrived:
            job = self.jobs[job_id].trace
            self.active_weight += job.weight
            self.active_submit += job.weight * job.submit_s
        for job_id in changes.completed:
            run = self.jobs[job_id]
            assert run.end is not None
            job = run.trace
            self.active_weight -= job.weight
            self.active_submit -= job.weight * job.submit_s
            self.done += job.weight * (run.end - job.submit_s)

    def cost_at(self, now: int) -> float:
        """C(now), given every arrival and completion up to ``now``."""
        return self.done + self.active_weight * now - self.active_submit

    def final_cost(self, end_s: int) -> float:
        """C(end_s) summed afresh over every job (the run is over at ``end_s``)."""
        cost = 0.0
        for run in self.jobs.values():
            if run.arrived:
                end = end_s if run.end is None else run.end
                cost += run.trace.weight * (end - run.trace.submit_s)
        return cost
