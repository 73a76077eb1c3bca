"""The CP-SAT variables of one round."""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import RoundData


@dataclass
class JobVars:
    """One job's variables.

    ``start`` (0 = now), ``present[type]`` and the optional ``interval[type]``
    in that type's pool, ``deferred``, ``now``; the start-now choices:
    ``options`` (single node), ``gang_racks`` with ``gang_nodes`` (whole nodes)
    and ``spread_groups`` with ``spread_counts`` (GPUs per node).
    """

    start: cp_model.IntVar
    deferred: cp_model.IntVar
    now: cp_model.IntVar
    present: dict[str, cp_model.IntVar] = field(default_factory=dict)
    interval: dict[str, cp_model.IntervalVar] = field(default_factory=dict)
    options: list[cp_model.IntVar] = field(default_factory=list)
    gang_racks: list[cp_model.IntVar] = field(default_factory=list)
    gang_nodes: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    spread_groups: list[cp_model.IntVar] = field(default_factory=list)
    spread_counts: list[dict[int, cp_model.IntVar]] = field(default_factory=list)


class Variables:
    """Creates and holds every variable of the round model."""

    def __init__(self, model: cp_model.CpModel, data: RoundData) -> None:
        self.model = model
        self.data = data
        self.jobs: list[JobVars] = [self._job_vars(k) for k in range(len(data.jobs))]

    def _job_vars(self, k: int) -> JobVars:
        item = self.data.jobs[k]
        job = self.data.instance.queue[item.position]
        horizon = self.data.instance.policy.horizon_s
        m = self.model
        tag = f"j{item.position}"
        start = m.new_int_var(0, horizon, f"start_{tag}")
        v = JobVars(start, m.new_bool_var(f"deferred_{tag}"), m.new_bool_var(f"now_{tag}"))
        for gpu_type, duration in item.durations.items():
            present = m.new_bool_var(f"on_{tag}_{gpu_type}")
            v.present[gpu_type] = present
            v.interval[gpu_type] = m.new_optional_fixed_size_interval_var(
                start, duration, present, f"run_{tag}_{gpu_type}"
            )
        v.options = [m.new_bool_var(f"opt_{tag}_{o}") for o in range(len(item.options))]
        for g, (_, nodes, _size) in enumerate(item.gangs):
            v.gang_racks.append(m.new_bool_var(f"gang_{tag}_{g}"))
            v.gang_nodes.append({n: m.new_bool_var(f"gang_{tag}_{g}_{n}") for n in nodes})
        for s, (_, nodes) in enumerate(item.spread):
            v.spread_groups.append(m.new_bool_var(f"spread_{tag}_{s}"))
            v.spread_counts.append(
                {
                    n: m.new_int_var(0, min(job.gpus, _free(self.data, n)), f"spread_{tag}_{s}_{n}")
                    for n in nodes
                }
            )
        return v


def _free(data: RoundData, node: int) -> int:
    return data.timeline.free_now[node].bit_count()
