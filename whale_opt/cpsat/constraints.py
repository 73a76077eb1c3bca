"""The CP-SAT constraints of one neighbourhood model, one method per family.

Every family is exact for the checker's rules, so any solution decodes into a
valid decision: per node, GPU counts, CPU and host memory over time (the
fixed jobs as fixed intervals, kept victims as optional ones); exact
NVLink-connected GPU sets for what starts now on nodes whose links are not
all to all; one GPU type, the gang shape and one rack per job; tenant quotas
over time; the NVLink shapes a preference prices; and the preemption rules
(a victim's GPUs go only to work when it is preempted, a displacing job
started now takes one of them, at most ``policy.max_preemptions``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator

from ortools.sat.python import cp_model

from whale_opt.bounds import earliest_starts
from whale_opt.cpsat.candidates import FreeJob, Mode, Neighbourhood, prices_nvlink
from whale_opt.cpsat.cuts import mean_busy_time_cuts
from whale_opt.cpsat.preemption import add_preemption_rules
from whale_opt.cpsat.shares import ShareGpus
from whale_opt.cpsat.variables import JobVars, Variables
from whale_opt.placement.profile import Profile
from whale_opt.problem_data import MILLI
from whale_opt.topology import bits, needs_nvlink, popcount

CPU_SCALE = 1000  # millicores
MEMORY_SCALE = 1024  # MB

Uses = list[tuple[cp_model.IntervalVar, cp_model.LinearExprT]]


class Constraints:
    """Adds every constraint family to the model, in order."""

    def __init__(
        self,
        model: cp_model.CpModel,
        hood: Neighbourhood,
        variables: Variables,
        *,
        whole: bool = False,
    ) -> None:
        self.model = model
        self.hood = hood
        self.vars = variables
        self.whole = whole  # the whole round's model: the dominance below joins
        # (node, GPU index) -> exact-set literals that take that GPU now
        self.takers: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        self.shares = ShareGpus(model, hood)
        # node -> intervals over which GPUs that freed shares open count whole
        self.opened: dict[int, Uses] = {}

    def add_constraints(self) -> None:
        """All families, in order."""
        self._select_type_or_defer()
        self._nodes_of_chosen_type()
        self._gang_shape()
        self._one_rack()
        self._deferred_start()
        self._earliest_starts()
        self._start_now_or_later()
        self._exact_gpus_now()
        self._nvlink_shapes()
        self._planned_after_release()
        self._node_capacity()
        self._type_capacity()
        self._mean_busy_times()
        self._tenant_quotas()
        self._zone_preference()
        add_preemption_rules(self)
        if self.whole:
            self._left_shifted()

    def pairs(self) -> Iterator[tuple[FreeJob, JobVars]]:
        return zip(self.hood.jobs, self.vars.jobs, strict=True)

    def _select_type_or_defer(self) -> None:
        """Each job runs on exactly one GPU type, or is deferred."""
        for _, v in self.pairs():
            self.model.add_exactly_one([*v.on_type.values(), v.deferred])

    def _nodes_of_chosen_type(self) -> None:
        """A job uses only nodes of its chosen type."""
        instance = self.hood.instance
        for _, v in self.pairs():
            for n, lit in v.on_node.items():
                self.model.add_implication(lit, v.on_type[instance.nodes[n].gpu_type])

    def _gang_shape(self) -> None:
        """One node, k whole nodes, or GPU counts adding up to the job's size."""
        instance = self.hood.instance
        m = self.model
        for item, v in self.pairs():
            job = instance.queue[item.position]
            placed = 1 - v.deferred
            if item.mode is Mode.SINGLE:
                m.add(sum(v.on_node.values()) == placed)
            elif item.mode is Mode.GANG:
                m.add(sum(v.on_node.values()) == (job.gpu_count // item.node_size) * placed)
            else:
                m.add(sum(v.count.values()) == job.gpu_count * placed)
                for n, count in v.count.items():
                    m.add(count >= 1).only_enforce_if(v.on_node[n])
                    m.add(count == 0).only_enforce_if(v.on_node[n].Not())

    def _one_rack(self) -> None:
        """Gangs and rack jobs keep all their nodes in one rack."""
        instance = self.hood.instance
        for _, v in self.pairs():
            if not v.in_rack:
                continue
            self.model.add(sum(v.in_rack.values()) == 1 - v.deferred)
            for n, lit in v.on_node.items():
                self.model.add_implication(lit, v.in_rack[instance.nodes[n].rack])

    def _deferred_start(self) -> None:
        """A deferred job's start is pinned to 0 (it is priced at the horizon)."""
        for _, v in self.pairs():
            self.model.add(v.start == 0).only_enforce_if(v.deferred)

    def _earliest_starts(self) -> None:
        """Redundant: a whole-GPU job starts on a type no earlier than it could with only
        the running jobs present (:class:`whale_opt.bounds.EarliestStarts`). The
        cumulatives imply it once the node is chosen; as one linear constraint it
        gives CP-SAT's LP every job's earliest end before any choice."""
        instance = self.hood.instance
        starts = earliest_starts(instance)
        for item, v in self.pairs():
            job = instance.queue[item.position]
            if job.shares or job.cpu_only:
                continue
            terms = []
            for gpu_type, lit in v.on_type.items():
                release = starts.start(item.position, gpu_type)
                if release == math.inf:
                    self.model.add(lit == 0)  # no placement on the type, ever
                elif release >= 1:
                    terms.append(int(release) * lit)
            if terms:
                self.model.add(v.start >= sum(terms))

    def _start_now_or_later(self) -> None:
        """Now means start 0; a placed job not started now starts at 1 or later."""
        for _, v in self.pairs():
            self.model.add(v.start == 0).only_enforce_if(v.now)
            self.model.add(v.start >= 1).only_enforce_if([v.now.Not(), v.deferred.Not()])
            self.model.add_implication(v.now, v.deferred.Not())

    def _here_now(self, on: cp_model.IntVar, now: cp_model.IntVar) -> cp_model.IntVar:
        """A literal equal to ``on and now``."""
        here = self.model.new_bool_var("")
        self.model.add_bool_and([on, now]).only_enforce_if(here)
        self.model.add_bool_or([on.Not(), now.Not()]).only_enforce_if(here.Not())
        return here

    def _exact_gpus_now(self) -> None:
        """Started now where links matter on a partially linked node: one free GPU set
        of the list (NVLink-connected when required), none shared."""
        m = self.model
        timeline = self.hood.timeline
        for item, v in self.pairs():
            job = self.hood.instance.queue[item.position]
            if job.shares:
                self._share_now(item, v)
                continue
            linked = needs_nvlink(job) or prices_nvlink(self.hood.instance, item.position)
            for n, lit in v.on_node.items():
                masks = item.now_masks.get(n)
                if item.mode is Mode.SPREAD:
                    # Only a one-node NVLink shape takes an exact set.
                    if n not in v.shape_node:
                        continue
                    lit = v.shape_node[n]
                    if masks is None:
                        if not timeline.topology(n).clique:
                            m.add_bool_or([lit.Not(), v.now.Not()])
                        continue
                elif masks is None:
                    if item.mode is Mode.SINGLE and linked and not timeline.topology(n).clique:
                        m.add_bool_or([lit.Not(), v.now.Not()])  # no listed set: not now here
                    continue
                m.add(sum(v.mask[n]) == self._here_now(lit, v.now))
                for mask, mask_lit in zip(masks, v.mask[n], strict=True):
                    for index in bits(mask):
                        self.takers[(n, index)].append(mask_lit)
        for lits in self.takers.values():
            if len(lits) > 1:
                m.add_at_most_one(lits)
        self.opened = self.shares.constrain(self.takers)

    def _share_now(self, item: FreeJob, v: JobVars) -> None:
        """A share started now on a node takes one GPU of its list there (:mod:`.shares`)."""
        instance = self.hood.instance
        job = instance.queue[item.position]
        for n, lit in v.on_node.items():
            masks = item.now_masks.get(n)
            if not masks:
                self.model.add_bool_or([lit.Not(), v.now.Not()])  # no GPU with room now
                continue
            self.model.add(sum(v.mask[n]) == self._here_now(lit, v.now))
            duration = item.durations[instance.nodes[n].gpu_type]
            for mask, mask_lit in zip(masks, v.mask[n], strict=True):
                self.shares.add(n, mask.bit_length() - 1, mask_lit, job.gpu_milli, duration)

    def _nvlink_shapes(self) -> None:
        """A spread job counts as NVLink-shaped only on one node that can link all its
        GPUs, or on whole linked nodes of one size in one rack."""
        m = self.model
        for item, v in self.pairs():
            if v.shaped is None:
                continue
            job = self.hood.instance.queue[item.position]
            m.add(v.shaped == sum(v.shape_node.values()) + sum(v.shape_gang.values()))
            m.add_implication(v.shaped, v.deferred.Not())
            for n, lit in v.shape_node.items():
                m.add(v.count[n] == job.gpu_count).only_enforce_if(lit)
            for size, rack, members in item.shape_gangs:
                gang = v.shape_gang[(size, rack)]
                for n, on in v.on_node.items():
                    if n in members:
                        m.add(v.count[n] == size).only_enforce_if([gang, on])
                    else:
                        m.add_bool_or([gang.Not(), on.Not()])

    def _planned_after_release(self) -> None:
        """A planned NVLink job on a partially linked node starts after some job there ends
        (a fixed one, a kept victim, or another freed job placed on that node)."""
        timeline = self.hood.timeline
        instance = self.hood.instance
        m = self.model
        pairs = list(self.pairs())
        for item, v in pairs:
            job = instance.queue[item.position]
            if item.mode is not Mode.SINGLE or job.gpu_count < 2 or job.topology != "nvlink":
                continue
            for n, lit in v.on_node.items():
                if timeline.topology(n).clique:
                    continue
                reasons: list[cp_model.IntVar] = []
                release = timeline.first_end_at(n)
                if release != float("inf"):
                    after_fixed = m.new_bool_var("")
                    m.add(v.start >= int(release)).only_enforce_if(after_fixed)
                    reasons.append(after_fixed)
                for index, victim in enumerate(self.hood.victims):
                    if n in victim.gpus and not victim.forced:
                        after_victim = m.new_bool_var("")
                        m.add_implication(after_victim, self.vars.victims[index].kept)
                        m.add(v.start >= victim.remaining).only_enforce_if(after_victim)
                        reasons.append(after_victim)
                for other, w in pairs:
                    if w is v or n not in w.on_node:
                        continue
                    duration = other.durations[instance.nodes[n].gpu_type]
                    after_other = m.new_bool_var("")
                    m.add_implication(after_other, w.on_node[n])
                    m.add(v.start >= w.start + duration).only_enforce_if(after_other)
                    reasons.append(after_other)
                m.add_bool_or(reasons).only_enforce_if([lit, v.now.Not()])
        # Fixed plans that relied on a freed job or a victim ending on their node keep a reason.
        for n, start in self.hood.needs_release:
            reasons = []
            for index, victim in enumerate(self.hood.victims):
                if n in victim.gpus and not victim.forced and victim.remaining <= start:
                    reasons.append(self.vars.victims[index].kept)
            for other, w in pairs:
                if n not in w.on_node:
                    continue
                duration = other.durations[instance.nodes[n].gpu_type]
                ends_before = m.new_bool_var("")
                m.add_implication(ends_before, w.on_node[n])
                m.add(w.start + duration <= start).only_enforce_if(ends_before)
                reasons.append(ends_before)
            m.add_bool_or(reasons)

    def _node_capacity(self) -> None:
        """Per node, GPUs, CPU and host memory over time stay within its capacity (GPUs
        in milli-GPUs on nodes where a freed share may go)."""
        instance = self.hood.instance
        timeline = self.hood.timeline
        gpu_use: dict[int, Uses] = defaultdict(list)
        cpu_use: dict[int, Uses] = defaultdict(list)
        mem_use: dict[int, Uses] = defaultdict(list)
        milli_nodes = set(self.opened) | {n for _, v in self.pairs() for n in v.planned}
        for n, uses in self.opened.items():
            gpu_use[n].extend(uses)
        for item, v in self.pairs():
            job = instance.queue[item.position]
            for n, interval in v.interval.items():
                k = MILLI if n in milli_nodes else 1
                gpus: cp_model.LinearExprT
                cpu: cp_model.LinearExprT
                mem: cp_model.LinearExprT
                if item.mode is Mode.SPREAD:
                    gpus = v.count[n] * k
                    cpu = v.count[n] * _per_gpu(job.cpu, job.gpu_count, CPU_SCALE)
                    mem = v.count[n] * _per_gpu(job.memory_gb, job.gpu_count, MEMORY_SCALE)
                else:
                    share = item.node_size if item.mode is Mode.GANG else job.gpu_count
                    gpus = share * k
                    part = share / job.gpu_count if job.gpu_count else 1.0  # CPU-only: one node
                    cpu = _ceil(job.cpu * part * CPU_SCALE)
                    mem = _ceil(job.memory_gb * part * MEMORY_SCALE)
                if job.shares:
                    gpu_use[n].append((v.planned[n], job.gpu_milli))
                elif job.gpu_count:
                    gpu_use[n].append((interval, gpus))
                if job.cpu:
                    cpu_use[n].append((interval, cpu))
                if job.memory_gb:
                    mem_use[n].append((interval, mem))
        for victim, w in zip(self.hood.victims, self.vars.victims, strict=True):
            if victim.forced:
                continue
            held = instance.running[victim.position]
            for n, mask in victim.gpus.items():
                part = popcount(mask) / len(held.gpu_ids)
                k = MILLI if n in milli_nodes else 1
                gpu_use[n].append((w.interval[n], popcount(mask) * k))
                if held.cpu:
                    cpu_use[n].append((w.interval[n], _ceil(held.cpu * part * CPU_SCALE)))
                if held.memory_gb:
                    mem_use[n].append((w.interval[n], _ceil(held.memory_gb * part * MEMORY_SCALE)))
        # CPU-only jobs use a node's CPU and memory and none of its GPUs.
        host_only = [n for n in {**cpu_use, **mem_use} if n not in gpu_use]
        for n in [*gpu_use, *host_only]:
            rec = instance.nodes[n]
            k = MILLI if n in milli_nodes else 1
            if gpu_use[n]:
                self._cumulative(
                    timeline.gpu_profile(n), k, timeline.healthy_count(n) * k, gpu_use[n]
                )
            if cpu_use[n]:
                self._cumulative(
                    timeline.cpu_profile(n), CPU_SCALE, int(rec.cpu * CPU_SCALE), cpu_use[n]
                )
            if mem_use[n]:
                self._cumulative(
                    timeline.mem_profile(n),
                    MEMORY_SCALE,
                    int(rec.memory_gb * MEMORY_SCALE),
                    mem_use[n],
                )

    def _type_capacity(self) -> None:
        """Redundant, implied by the per-node cumulatives: per GPU type, the GPUs the
        freed jobs and kept victims use over time stay within the type's healthy GPUs
        on the nodes they may use. It lets CP-SAT reason about the type's pooled
        capacity (a stronger bound) instead of one node at a time."""
        instance = self.hood.instance
        for gpu_type, nodes in self._nodes_of_type().items():
            uses: Uses = []
            for item, v in self.pairs():
                job = instance.queue[item.position]
                if gpu_type not in v.on_type or job.shares or job.cpu_only:
                    continue  # leaving a use out keeps a redundant cumulative valid
                interval = self.model.new_optional_fixed_size_interval_var(
                    v.start, item.durations[gpu_type], v.on_type[gpu_type], ""
                )
                uses.append((interval, job.gpu_count))
            if len(uses) < 2:
                continue  # one job: the per-node cumulatives say all there is
            for victim, w in zip(self.hood.victims, self.vars.victims, strict=True):
                held = sum(popcount(mask) for n, mask in victim.gpus.items() if n in nodes)
                if held and not victim.forced:
                    uses.append((next(iter(w.interval.values())), held))
            fixed, capacity = self._fixed_gpus(nodes)
            self._cumulative(fixed, 1, capacity, uses)

    def _nodes_of_type(self) -> dict[str, set[int]]:
        """Per GPU type, the freed jobs' candidate nodes of that type."""
        instance = self.hood.instance
        nodes_of: dict[str, set[int]] = defaultdict(set)
        for item in self.hood.jobs:
            for n in item.nodes:
                nodes_of[instance.nodes[n].gpu_type].add(n)
        return nodes_of

    def _fixed_gpus(self, nodes: set[int]) -> tuple[Profile, int]:
        """The GPUs the fixed jobs use over time on ``nodes`` (capped at the healthy ones),
        and how many healthy GPUs the nodes have."""
        timeline = self.hood.timeline
        fixed = Profile()
        for n in nodes:
            used = timeline.gpu_profile(n)
            for k, t in enumerate(used.times):
                end = used.times[k + 1] if k + 1 < len(used.times) else self._far()
                level = min(used.levels[k], timeline.healthy_count(n))
                if level > 0:
                    fixed.add(t, end, level)
        return fixed, sum(timeline.healthy_count(n) for n in nodes)

    def _mean_busy_times(self) -> None:
        """Redundant: the freed whole-GPU jobs' mean busy times against the free GPUs of
        each type, the free pieces of each gang size, and all types pooled
        (:mod:`whale_opt.cpsat.cuts`): CP-SAT's LP then sees what the flow bound
        sees, and the contention for whole nodes too."""
        instance = self.hood.instance
        timeline = self.hood.timeline
        nodes = {
            gpu_type: [(timeline.gpu_profile(n), timeline.healthy_count(n)) for n in sorted(ns)]
            for gpu_type, ns in self._nodes_of_type().items()
        }
        shapes = {}
        for item in self.hood.jobs:
            job = instance.queue[item.position]
            if job.shares or job.cpu_only:
                continue
            if item.mode is Mode.SINGLE:
                shapes[item.position] = (job.gpu_count, 1)
            elif item.mode is Mode.GANG:
                shapes[item.position] = (item.node_size, job.gpu_count // item.node_size)
            else:
                shapes[item.position] = (1, job.gpu_count)
        speeds = {p: instance.gpu_types[p].speed for p in nodes}
        weights = {item.position: instance.weights[item.position] for item in self.hood.jobs}
        mean_busy_time_cuts(self.model, list(self.pairs()), nodes, speeds, weights, shapes)

    def _cumulative(self, fixed: Profile, scale: int, capacity: int, uses: Uses) -> None:
        """A cumulative of ``uses`` on top of the fixed usage ``fixed`` (scaled, capped)."""
        intervals = [interval for interval, _ in uses]
        demands = [demand for _, demand in uses]
        times, levels = fixed.times, fixed.levels
        for k, level in enumerate(levels):
            amount = min(capacity, _ceil(level * scale - 1e-6))
            if amount <= 0:
                continue
            end = times[k + 1] if k + 1 < len(times) else self._far()
            intervals.append(self.model.new_fixed_size_interval_var(times[k], end - times[k], ""))
            demands.append(amount)
        self.model.add_cumulative(intervals, demands, capacity)

    def _far(self) -> int:
        horizon = self.hood.instance.policy.horizon_s
        longest = max((max(item.durations.values()) for item in self.hood.jobs), default=0)
        held = max((victim.remaining for victim in self.hood.victims), default=0)
        return max(horizon + longest, held) + 1

    def _tenant_quotas(self) -> None:
        """A tenant's GPUs over time stay within its quota (over-quota running jobs may stay,
        but then nothing new of the tenant runs)."""
        instance = self.hood.instance
        for name, tenant in instance.tenants.items():
            if tenant.gpu_quota is None:
                continue
            mine = [
                (item, v)
                for item, v in self.pairs()
                if instance.queue[item.position].tenant == name
            ]
            # Shares count their fraction: milli-GPUs where the tenant has a freed one.
            k = MILLI if any(instance.queue[item.position].shares for item, _ in mine) else 1
            uses: Uses = []
            for item, v in mine:
                job = instance.queue[item.position]
                for n, interval in v.interval.items():
                    if job.shares:
                        uses.append((interval, job.gpu_milli))
                    elif item.mode is Mode.SPREAD:
                        uses.append((interval, v.count[n] * k))
                    elif job.gpu_count:
                        uses.append((interval, (item.node_size or job.gpu_count) * k))
            for victim, w in zip(self.hood.victims, self.vars.victims, strict=True):
                held = instance.running[victim.position]
                if held.tenant == name and not victim.forced:
                    uses.append((next(iter(w.interval.values())), len(held.gpu_ids) * k))
            if uses:
                profile = self.hood.timeline.tenant_profile(name)
                self._cumulative(profile, k, tenant.gpu_quota * k, uses)

    def _left_shifted(self) -> None:
        """Dominance, not a rule: a placed job not started now starts at 1, at a moment
        the fixed usage of one of its candidate nodes (or of its tenant's quota)
        changes, when a job there first ends (the release rule's moment), when a
        victim holding GPUs there (or of the quota) would end, or when a freed job
        that may share a node (or the quota) with it ends.

        Any valid decision maps onto one of these that costs no more (a
        semi-active schedule): a job starting at none of these moments moves back
        to the last one before its start. Nothing on its nodes or its quota ends
        in between, so everything running there at any moment in between still
        runs at its start, where it fitted beside them; its cost (its end, with
        the same placement) only falls. Each move takes a whole second off the
        starts' sum, so the moves end. Without it, CP-SAT improved a whole
        round's incumbent mostly by moving one start one second earlier (a
        16-job round of 64 GPUs: 479 solutions in 21 s), and its proof had
        every second of every start to rule out.

        Left out when a freed job shares a GPU: GPUs freed shares open count
        whole over intervals of their own (:mod:`.shares`)."""
        instance = self.hood.instance
        pairs = list(self.pairs())
        if any(instance.queue[item.position].shares for item, _ in pairs):
            return
        m = self.model
        horizon = instance.policy.horizon_s
        ends = [
            w.start + sum(d * w.on_type[p] for p, d in item.durations.items()) for item, w in pairs
        ]
        on_node, of_quota = self._fixed_moments()
        for j, (item, v) in enumerate(pairs):
            tenant = instance.queue[item.position].tenant
            shared = tenant in of_quota
            nodes = set(item.nodes)
            fixed = {1}.union(*(on_node[n] for n in nodes))
            if shared:
                fixed |= of_quota[tenant]
            fixed |= {
                victim.remaining
                for victim in self.hood.victims
                if nodes & victim.gpus.keys()
                or (shared and instance.running[victim.position].tenant == tenant)
            }
            reasons = [v.now, v.deferred]
            for t in sorted(t for t in fixed if 1 <= t <= horizon):
                at = m.new_bool_var("")
                m.add(v.start == t).only_enforce_if(at)
                reasons.append(at)
            for k, (other, w) in enumerate(pairs):
                if k == j:
                    continue
                same_quota = shared and instance.queue[other.position].tenant == tenant
                if not (same_quota or nodes.intersection(other.nodes)):
                    continue
                after = m.new_bool_var("")
                m.add_implication(after, w.deferred.Not())
                m.add(v.start == ends[k]).only_enforce_if(after)
                reasons.append(after)
            m.add_bool_or(reasons)

    def _fixed_moments(self) -> tuple[dict[int, set[int]], dict[str, set[int]]]:
        """Per candidate node, the moments its fixed GPU, CPU or memory use changes and
        the first end of a job there (the release rule's, :meth:`_planned_after_release`:
        a job asking no CPU or memory, or a share under a longer one on its GPU,
        ends without changing any use); per tenant with a GPU quota, the moments
        its fixed GPUs change."""
        timeline = self.hood.timeline
        on_node: dict[int, set[int]] = {}
        for n in {n for item in self.hood.jobs for n in item.nodes}:
            on_node[n] = {
                int(t)
                for profile in (
                    timeline.gpu_profile(n),
                    timeline.cpu_profile(n),
                    timeline.mem_profile(n),
                )
                for t in profile.times
            }
            release = timeline.first_end_at(n)
            if release != float("inf"):
                on_node[n].add(int(release))
        of_quota = {
            name: {int(t) for t in timeline.tenant_profile(name).times}
            for name, tenant in self.hood.instance.tenants.items()
            if tenant.gpu_quota is not None
        }
        return on_node, of_quota

    def _zone_preference(self) -> None:
        """``outside`` is set when any chosen node lies outside the preferred zone."""
        for item, v in self.pairs():
            if v.outside is None:
                continue
            for n, lit in v.on_node.items():
                if n in item.prices.outside:
                    self.model.add_implication(lit, v.outside)


def _ceil(value: float) -> int:
    return int(-(-value // 1))


def _per_gpu(total: float, gpus: int, scale: int) -> int:
    return _ceil(total / gpus * scale)
