"""The CP-SAT constraints of one round, one method per family."""

from __future__ import annotations

from collections import defaultdict

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import RoundData
from whale_opt.cpsat.variables import Variables
from whale_opt.timeline import Profile
from whale_opt.topology import bits

CPU_SCALE = 1000  # millicores
MEMORY_SCALE = 1024  # MB


class Constraints:
    """Adds every constraint family to the model, in order."""

    def __init__(self, model: cp_model.CpModel, data: RoundData, variables: Variables) -> None:
        self.model = model
        self.data = data
        self.vars = variables

    def add_constraints(self) -> None:
        """All families, in order."""
        self._select_one_type()
        self._deferred_start()
        self._start_now_or_later()
        self._start_now_choice()
        self._now_node_capacity()
        self._now_gpu_exclusive()
        self._pool_capacity()
        self._tenant_quotas()

    def _select_one_type(self) -> None:
        """Each job runs on exactly one GPU type, or is deferred."""
        for v in self.vars.jobs:
            self.model.add_exactly_one([*v.present.values(), v.deferred])

    def _deferred_start(self) -> None:
        """A deferred job's start is pinned to 0 (it counts at the horizon)."""
        for v in self.vars.jobs:
            self.model.add(v.start == 0).only_enforce_if(v.deferred)

    def _start_now_or_later(self) -> None:
        """Now means start 0; a placed job not started now starts at 1 or later."""
        for v in self.vars.jobs:
            self.model.add(v.start == 0).only_enforce_if(v.now)
            self.model.add(v.start + v.now + v.deferred >= 1)
            self.model.add_implication(v.now, v.deferred.Not())

    def _start_now_choice(self) -> None:
        """A job started now takes exactly one start-now choice of its chosen type."""
        m = self.model
        for item, v in zip(self.data.jobs, self.vars.jobs, strict=True):
            choices = [*v.options, *v.gang_racks, *v.spread_groups]
            m.add(sum(choices) == v.now)
            for option, lit in zip(item.options, v.options, strict=True):
                m.add_implication(lit, v.present[option.gpu_type])
            job = self.data.instance.queue[item.position]
            for (gpu_type, _, size), rack, nodes in zip(
                item.gangs, v.gang_racks, v.gang_nodes, strict=True
            ):
                m.add_implication(rack, v.present[gpu_type])
                m.add(sum(nodes.values()) == (job.gpus // size) * rack)
            for (gpu_type, _), group, counts in zip(
                item.spread, v.spread_groups, v.spread_counts, strict=True
            ):
                m.add_implication(group, v.present[gpu_type])
                m.add(sum(counts.values()) == job.gpus * group)
                for count in counts.values():
                    m.add(count == 0).only_enforce_if(group.Not())
            if not choices:
                m.add(v.now == 0)

    def _node_loads(self) -> dict[int, list[tuple[int, float, float, cp_model.LinearExprT]]]:
        """Per node: (GPUs, CPU per GPU, memory per GPU, amount expression) of every choice."""
        loads: dict[int, list[tuple[int, float, float, cp_model.LinearExprT]]] = defaultdict(list)
        for item, v in zip(self.data.jobs, self.vars.jobs, strict=True):
            job = self.data.instance.queue[item.position]
            cpu, memory = job.cpu / job.gpus, job.memory_gb / job.gpus
            for option, lit in zip(item.options, v.options, strict=True):
                for node, count in zip(option.nodes, option.counts, strict=True):
                    loads[node].append((count, cpu, memory, lit))
            for (_, _, size), nodes in zip(item.gangs, v.gang_nodes, strict=True):
                for node, lit in nodes.items():
                    loads[node].append((size, cpu, memory, lit))
            for counts in v.spread_counts:
                for node, count_var in counts.items():
                    loads[node].append((1, cpu, memory, count_var))
        return loads

    def _now_node_capacity(self) -> None:
        """GPUs, CPU and host memory started now on a node fit what is free there."""
        timeline = self.data.timeline
        for node, loads in self._node_loads().items():
            rec = self.data.instance.nodes[node]
            free = timeline.free_now[node].bit_count()
            self.model.add(sum(g * expr for g, _, _, expr in loads) <= free)
            cpu_room = rec.cpu - timeline.cpu_use[node].level_at(0)
            if any(c for _, c, _, _ in loads):
                self.model.add(
                    sum(round(g * c * CPU_SCALE) * expr for g, c, _, expr in loads)
                    <= int(cpu_room * CPU_SCALE + 1e-6)
                )
            memory_room = rec.memory_gb - timeline.mem_use[node].level_at(0)
            if any(mem for _, _, mem, _ in loads):
                self.model.add(
                    sum(round(g * mem * MEMORY_SCALE) * expr for g, _, mem, expr in loads)
                    <= int(memory_room * MEMORY_SCALE + 1e-6)
                )

    def _now_gpu_exclusive(self) -> None:
        """Exact GPU sets started now never overlap."""
        users: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        for item, v in zip(self.data.jobs, self.vars.jobs, strict=True):
            for option, lit in zip(item.options, v.options, strict=True):
                for node, mask in zip(option.nodes, option.masks, strict=False):
                    for index in bits(mask):
                        users[(node, index)].append(lit)
        for lits in users.values():
            if len(lits) > 1:
                self.model.add_at_most_one(lits)

    def _pool_capacity(self) -> None:
        """Per GPU type, GPUs in use over time never exceed the healthy ones."""
        instance = self.data.instance
        running: dict[str, Profile] = defaultdict(Profile)
        for job in instance.running:
            per_type: dict[str, int] = defaultdict(int)
            for gpu in job.gpus:
                per_type[instance.nodes[instance.parse_gpu(gpu).node].gpu_type] += 1
            for gpu_type, count in per_type.items():
                running[gpu_type].add(0, job.remaining_s, count)
        for gpu_type, capacity in self.data.pools.items():
            intervals, demands = self._fixed(running[gpu_type], capacity)
            for item, v in zip(self.data.jobs, self.vars.jobs, strict=True):
                if gpu_type in v.interval:
                    intervals.append(v.interval[gpu_type])
                    demands.append(instance.queue[item.position].gpus)
            if intervals:
                self.model.add_cumulative(intervals, demands, capacity)

    def _fixed(self, profile: Profile, cap: int) -> tuple[list[cp_model.IntervalVar], list[int]]:
        """Fixed intervals reproducing ``profile`` (capped at ``cap``)."""
        intervals: list[cp_model.IntervalVar] = []
        demands: list[int] = []
        times = profile.times
        for k, level in enumerate(profile.levels):
            amount = int(min(level, cap))
            if amount <= 0 or k + 1 >= len(times):
                continue
            intervals.append(
                self.model.new_fixed_size_interval_var(times[k], times[k + 1] - times[k], "")
            )
            demands.append(amount)
        return intervals, demands

    def _tenant_quotas(self) -> None:
        """A tenant's GPUs in use over time stay within its quota."""
        instance = self.data.instance
        for name, tenant in instance.tenants.items():
            if tenant.gpu_quota is None:
                continue
            mine = [
                (item, v)
                for item, v in zip(self.data.jobs, self.vars.jobs, strict=True)
                if instance.queue[item.position].tenant == name
            ]
            if not mine:
                continue
            held = Profile()
            for job in instance.running:
                if job.tenant == name:
                    held.add(0, job.remaining_s, len(job.gpus))
            # Running jobs over quota may stay, but then nothing new of the tenant runs.
            intervals, demands = self._fixed(held, tenant.gpu_quota)
            for item, v in mine:
                for interval in v.interval.values():
                    intervals.append(interval)
                    demands.append(instance.queue[item.position].gpus)
            self.model.add_cumulative(intervals, demands, tenant.gpu_quota)
