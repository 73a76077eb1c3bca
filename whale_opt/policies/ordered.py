"""What the order-based baselines share: list scheduling in a policy's own order.

A baseline is an order over the queue (which job goes first) and a placement
preference (where each job goes, see :data:`whale_opt.placement.search.PREFERENCES`).
:class:`OrderedPolicy` turns the pair into a decision through the same serial
schedule generator as the greedy, so every baseline honours the same
placement rules and its decisions pass the same checker.

**Overdue jobs come first, then priority classes.** A job that has waited
longer than its wait ceiling (:attr:`~whale_opt.problem_data.Instance.overdue`)
goes ahead of every job that has not, whatever the classes; overdue jobs go
in the order they passed their ceilings (first past, first served: with one
ceiling for all, that is submission order), then by submission and id.
Every other job is ordered by priority class rank (higher first: ``online``
before ``training`` before ``best-effort`` with the default classes), and
only then by the policy's own key; ties go to the earlier submission, then
the id. Weights are effective weights
(:attr:`~whale_opt.problem_data.Instance.weights`: class factor, aging and
the overdue lift included).

**Preemption.** When the policy allows it and some running job may be
preempted now, the list schedule is followed by :mod:`whale_opt.placement.preempt`:
jobs that did not start may displace lower-ranked (or borrowed) running work
where that pays, and the better of the two schedules is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from whale_opt.bounds import reported_bound
from whale_opt.decision import Decision, Status
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.placement.preempt import improve_by_preemption
from whale_opt.placement.serial import assemble, list_schedule
from whale_opt.problem_data import Instance, QueuedJob, class_rank


def ranked(instance: Instance, key: Callable[[int, QueuedJob], Any]) -> list[int]:
    """Queue positions: overdue jobs first, by when they passed their ceilings;
    then the others by class rank (highest first), then ``key(position, job)``;
    ties broken by submit time, then id.

    Ordering overdue jobs by when they passed their own ceilings, rather than
    by submission, serves first the job that is furthest past its promise
    (Jackson's earliest-due-date rule minimises the largest overrun); the two
    orders agree when every class has the same ceiling.
    """

    def full_key(position: int) -> tuple[Any, ...]:
        job = instance.queue[position]
        if instance.overdue[position]:
            return (0, instance.ceiling_at(position), job.submitted_at, job.id)
        return (1, -class_rank(instance, job), key(position, job), job.submitted_at, job.id)

    return sorted(range(len(instance.queue)), key=full_key)


class OrderedPolicy:
    """List scheduling of the queue in :meth:`order`, placing by :attr:`prefer`.

    Subclasses set ``name`` and ``prefer`` and implement :meth:`order`
    (overdue jobs, then class rank first: build it with :func:`ranked`).

    Attributes
    ----------
    name
        The policy's registry name, written into its decisions.
    prefer
        The placement preference of the list schedule: ``"end"``,
        ``"best-fit"`` or ``"frag-aware"``.
    """

    name: str = "ordered"
    prefer: str = "end"

    def order(self, instance: Instance) -> list[int]:
        """Queue positions in the order the list schedule places them."""
        raise NotImplementedError

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        """The list schedule of :meth:`order` (improved by preemption where the
        policy allows it), with the analytic lower bound."""
        started = time.perf_counter()
        order = self.order(instance)
        jobs = list_schedule(instance, order, prefer=self.prefer)
        jobs = improve_by_preemption(instance, order, jobs, prefer=self.prefer)
        return assemble(
            instance,
            self.name,
            jobs,
            Status.FEASIBLE,
            reported_bound(instance, options.report_bound),
            started,
        )
