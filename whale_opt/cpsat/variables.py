"""The CP-SAT variables of one neighbourhood model."""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import FreeJob, Mode, Neighbourhood, Victim


@dataclass
class JobVars:
    """One freed job's variables.

    ``start`` (0 = now), ``deferred``, ``now``; ``on_type[type]``; per
    candidate node ``on_node[n]`` with its optional ``interval[n]`` and, for
    spread jobs, the GPU ``count[n]``; ``in_rack[rack]`` for jobs held to one
    rack; ``mask[n]`` literals for exact GPU sets started now; ``outside``
    when any chosen node is outside the preferred zone. A spread job that
    prices NVLink has ``shaped`` (its placement is NVLink-shaped), through
    ``shape_node[n]`` (all on node ``n``) or ``shape_gang[(size, rack)]``.
    ``by_mask`` / ``by_count[(victim, node)]``: it starts now on that node on
    one of the victim's GPUs, through an exact set / a GPU count. A share of a
    GPU planned later on node ``n`` counts its fraction of a GPU there through
    ``planned[n]`` (present when on ``n`` and not now); started now, through
    the GPU it takes (``mask[n]``: one-GPU sets).
    """

    start: cp_model.IntVar
    deferred: cp_model.IntVar
    now: cp_model.IntVar
    on_type: dict[str, cp_model.IntVar] = field(default_factory=dict)
    on_node: dict[int, cp_model.IntVar] = field(default_factory=dict)
    interval: dict[int, cp_model.IntervalVar] = field(default_factory=dict)
    count: dict[int, cp_model.IntVar] = field(default_factory=dict)
    in_rack: dict[str, cp_model.IntVar] = field(default_factory=dict)
    mask: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)
    outside: cp_model.IntVar | None = None
    shaped: cp_model.IntVar | None = None
    shape_node: dict[int, cp_model.IntVar] = field(default_factory=dict)
    shape_gang: dict[tuple[int, str], cp_model.IntVar] = field(default_factory=dict)
    by_mask: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    by_count: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    planned: dict[int, cp_model.IntervalVar] = field(default_factory=dict)


@dataclass
class VictimVars:
    """One victim's variables: ``kept``, and its optional ``interval[n]`` per node."""

    kept: cp_model.IntVar
    interval: dict[int, cp_model.IntervalVar] = field(default_factory=dict)


class Variables:
    """Creates and holds every variable of the neighbourhood model."""

    def __init__(self, model: cp_model.CpModel, hood: Neighbourhood) -> None:
        self.model = model
        self.hood = hood
        self.jobs: list[JobVars] = [self._job_vars(item) for item in hood.jobs]
        self.victims: list[VictimVars] = [self._victim_vars(victim) for victim in hood.victims]

    def _job_vars(self, item: FreeJob) -> JobVars:
        instance = self.hood.instance
        job = instance.queue[item.position]
        m = self.model
        tag = f"j{item.position}"
        v = JobVars(
            m.new_int_var(0, instance.policy.horizon_s, f"start_{tag}"),
            m.new_bool_var(f"deferred_{tag}"),
            m.new_bool_var(f"now_{tag}"),
        )
        v.on_type = {p: m.new_bool_var(f"type_{tag}_{p}") for p in item.durations}
        for n in item.nodes:
            node = instance.nodes[n]
            v.on_node[n] = m.new_bool_var(f"node_{tag}_{n}")
            v.interval[n] = m.new_optional_fixed_size_interval_var(
                v.start, item.durations[node.gpu_type], v.on_node[n], f"run_{tag}_{n}"
            )
            if item.mode is Mode.SPREAD:
                v.count[n] = m.new_int_var(
                    0, min(job.gpu_count, node.gpu_count), f"count_{tag}_{n}"
                )
        if job.shares:
            for n, lit in v.on_node.items():
                later = m.new_bool_var(f"later_{tag}_{n}")
                m.add_bool_and([lit, v.now.Not()]).only_enforce_if(later)
                m.add_bool_or([lit.Not(), v.now, later])
                v.planned[n] = m.new_optional_fixed_size_interval_var(
                    v.start, item.durations[instance.nodes[n].gpu_type], later, f"plan_{tag}_{n}"
                )
        if item.mode is Mode.GANG or (item.mode is Mode.SPREAD and job.topology == "rack"):
            for rack in sorted({instance.nodes[n].rack for n in item.nodes}):
                v.in_rack[rack] = m.new_bool_var(f"rack_{tag}_{rack}")
        for n, masks in item.now_masks.items():
            v.mask[n] = [m.new_bool_var(f"mask_{tag}_{n}_{k}") for k in range(len(masks))]
        if item.prices.outside:
            v.outside = m.new_bool_var(f"outside_{tag}")
        if item.prices.nvlink:
            v.shaped = m.new_bool_var(f"shaped_{tag}")
            v.shape_node = {n: m.new_bool_var(f"shape_{tag}_{n}") for n in item.shape_nodes}
            v.shape_gang = {
                (size, rack): m.new_bool_var(f"shape_{tag}_{size}_{rack}")
                for size, rack, _ in item.shape_gangs
            }
        for index, victim in enumerate(self.hood.victims):
            if item.position not in victim.displacers:
                continue
            for n in victim.gpus:
                if n not in v.on_node:
                    continue
                if n in item.now_masks:
                    v.by_mask[(index, n)] = m.new_bool_var(f"by_mask_{tag}_{index}_{n}")
                if n not in item.now_masks or item.mode is Mode.SPREAD:
                    v.by_count[(index, n)] = m.new_bool_var(f"by_count_{tag}_{index}_{n}")
        return v

    def _victim_vars(self, victim: Victim) -> VictimVars:
        m = self.model
        tag = f"r{victim.position}"
        kept = m.new_bool_var(f"kept_{tag}")
        out = VictimVars(kept)
        for n in victim.gpus:
            out.interval[n] = m.new_optional_fixed_size_interval_var(
                0, victim.remaining, kept, f"held_{tag}_{n}"
            )
        return out
