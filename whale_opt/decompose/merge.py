"""The pools' decisions as one decision of the whole cluster, its rules checked again."""

from __future__ import annotations

import time
from collections import defaultdict

from whale_opt.bounds import reported_bound, trivial_bound
from whale_opt.budget import TAIL_REASON, round_cost
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.decompose.cut import Pool
from whale_opt.options import SolveOptions
from whale_opt.placement.profile import Profile
from whale_opt.placement.reasons import deferral_reason
from whale_opt.placement.records import to_job_decision, to_placement
from whale_opt.placement.serial import assemble
from whale_opt.placement.state import ClusterState
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.rules import preemption_problems, unreleased_plans

# The cost model puts 80% of bounds within 0.86-1.55x of what they take: 0.7
# leaves room for most, and keeps the 10,000-GPU round's bound (predicted 5.9 s,
# 9 s left at 30 s) that half the time left would drop.
BOUND_LEFT_SHARE = 0.7


def _has_quota(instance: Instance, position: int) -> bool:
    tenant = instance.tenants.get(instance.queue[position].tenant)
    return tenant is not None and tenant.gpu_quota is not None


class _Merge:
    """The pools' decisions as one, and the jobs the whole-cluster rules take out."""

    def __init__(self, instance: Instance, decisions: list[Decision]) -> None:
        self.instance = instance
        position = instance.queue_index
        running = instance.running_index
        self.decided: dict[int, JobDecision] = {}
        self.preempted: set[int] = set()  # running positions
        for decision in decisions:
            for item in decision.jobs:
                if item.id in position:
                    self.decided[position[item.id]] = item
                elif item.id in running and item.action is Action.PREEMPT:
                    self.preempted.add(running[item.id])
        self.placements = {k: to_placement(instance, k, i) for k, i in self.decided.items()}
        # Quota jobs a pool deferred may fit elsewhere: try them again too, but
        # not those it left for a later round for want of time (a lost pool's
        # tail): placing them here costs the time their pool did not have.
        self.again = {
            k
            for k, p in self.placements.items()
            if p is None and _has_quota(instance, k) and self.decided[k].reason != TAIL_REASON
        }

    def items(self) -> list[JobDecision]:
        """The queued decisions kept so far and the preemptions."""
        kept = [item for k, item in self.decided.items() if k not in self.again]
        return kept + [
            JobDecision(self.instance.running[r].id, Action.PREEMPT) for r in sorted(self.preempted)
        ]

    def settle(self) -> None:
        """Take out what breaks a whole-cluster rule until nothing does."""
        while True:
            before = (len(self.again), len(self.preempted))
            self._preemption_rules()
            self._quotas()
            self._release_rule()
            if (len(self.again), len(self.preempted)) == before:
                return

    def _preemption_rules(self) -> None:
        """A preemption that breaks a rule is undone, with what used its GPUs."""
        instance = self.instance
        if not self.preempted:
            return  # nothing to undo
        running = instance.running_index
        for job_id, _ in preemption_problems(instance, self.items()):
            r = running[job_id]
            if r not in self.preempted:
                continue
            self.preempted.discard(r)
            nodes = set(instance.held_nodes(instance.running[r]))
            end = instance.running[r].remaining_s
            for k, placement in self.placements.items():
                if placement is not None and placement.start < end and set(placement.nodes) & nodes:
                    self.again.add(k)

    def _quotas(self) -> None:
        """Jobs of tenants with a quota, in start order, within the whole quota."""
        instance = self.instance
        placed = {k: p for k, p in self.placements.items() if p is not None and k not in self.again}
        bound = {instance.queue[k].tenant for k in placed if _has_quota(instance, k)}
        if not bound:
            return
        use: dict[str, Profile] = defaultdict(Profile)  # GPUs held per tenant over time
        for r, held in enumerate(instance.running):
            if r not in self.preempted and held.tenant in bound:
                use[held.tenant].add(0, held.remaining_s, len(held.gpu_ids))
        for k in sorted(placed, key=lambda k: (placed[k].start, k)):
            job = instance.queue[k]
            if _has_quota(instance, k):
                quota = instance.tenants[job.tenant].gpu_quota or 0
                profile = use[job.tenant]
                if profile.peak(placed[k].start, placed[k].end) + job.gpu_count > quota:
                    self.again.add(k)
                    continue
                profile.add(placed[k].start, placed[k].end, job.gpu_count)

    def _release_rule(self) -> None:
        """Planned NVLink jobs that lost the end they waited for go again.

        Only where a placement was taken out: each pool's plans keep the rule on
        its own nodes, which no other pool shares, so only the nodes of a job
        taken out can lose an end (and a preemption undone only adds one).
        """
        nodes = {k: set(p.nodes) for k, p in self.placements.items() if p is not None}
        touched = set().union(*(nodes[k] for k in self.again if k in nodes))
        if not touched:
            return
        near = [
            item
            for k, item in self.decided.items()
            if k not in self.again and k in nodes and touched & nodes[k]
        ]
        near += [JobDecision(self.instance.running[r].id, Action.PREEMPT) for r in self.preempted]
        position = self.instance.queue_index
        for job_id in unreleased_plans(self.instance, near):
            self.again.add(position[job_id])


def merge(
    instance: Instance,
    parts: list[Pool],
    decisions: list[Decision],
    solver: str,
    started: float,
    options: SolveOptions,
) -> Decision:
    """One decision for the whole instance from the pools' decisions.

    Pools cannot see each other's share of a tenant's running GPUs or of the
    preemption cap, so the preemption rules and the quotas are re-checked on
    the whole decision (:class:`_Merge`); the few jobs taken out are
    list-scheduled again on the whole cluster, within their own pool.
    """
    state = _Merge(instance, decisions)
    state.settle()
    decided = dict(state.decided)
    if state.again or len(decided) < len(instance.queue):
        _replace_again(instance, parts, state, decided)
    jobs = [decided[k] for k in range(len(instance.queue))]  # in queue order
    jobs += [
        JobDecision(job.id, Action.PREEMPT if r in state.preempted else Action.KEEP)
        for r, job in enumerate(instance.running)
    ]
    statuses = {d.status for d in decisions}
    status = (
        Status.FEASIBLE
        if statuses & {Status.FEASIBLE, Status.OPTIMAL}
        else (Status.GREEDY_FALLBACK)
    )

    # The analytic bound when it is expected in BOUND_LEFT_SHARE of the time the
    # round has left, else the trivial one.
    left = started + options.time_limit_s - time.perf_counter()
    fits = options.report_bound and round_cost(instance).bound_s <= BOUND_LEFT_SHARE * left
    bound = reported_bound(instance) if fits else trivial_bound(instance)
    return assemble(instance, solver, jobs, status, bound, started)


def _replace_again(
    instance: Instance, parts: list[Pool], state: _Merge, decided: dict[int, JobDecision]
) -> None:
    """Into ``decided`` (queue position -> decision): the jobs the merge took out,
    list-scheduled again on the whole cluster, and the jobs no pool could hold
    (:meth:`~whale_opt.decompose.cut._NodeView.pools_of`) after them; a deferral
    with its reason for every other queued job no pool decided.

    Only rounds with such jobs build the whole cluster's occupancy.
    """
    gone = frozenset(instance.running[r].id for r in state.preempted)
    timeline = ClusterState(instance, preempted=gone)
    for k, placement in state.placements.items():
        if placement is not None and k not in state.again:
            timeline.commit(k, placement)
    # Re-place within the job's own pool: its nodes are where it was meant to go,
    # and searching the whole cluster costs more than the round has. A job of no
    # pool is searched for on the whole cluster: there are few, and none fits a pool.
    home = {k: frozenset(pool.nodes) for pool in parts for k in pool.jobs}
    homeless = {
        k
        for k in range(len(instance.queue))
        if k not in decided and k not in home and timeline.eligible(k)
    }
    for k in wspt_order(instance):
        if k not in state.again and k not in homeless:
            continue
        placement = timeline.best_placement(k, within=home.get(k))
        if placement is None:
            decided[k] = JobDecision(
                instance.queue[k].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, k, timeline),
            )
            continue
        timeline.commit(k, placement)
        decided[k] = to_job_decision(instance, k, placement)
    for k, job in enumerate(instance.queue):
        if k not in decided:
            reason = deferral_reason(instance, k, timeline)
            decided[k] = JobDecision(job.id, Action.DEFERRED, reason=reason)
