"""decision@1 JSON: a :class:`~whale_opt.decision.Decision` read from and
written to files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.io.files import DECISION_FORMAT, _check_format, _validate, load_json, write_json


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    """The decision@1 JSON object of ``decision`` (``stats`` only when it has any)."""
    out: dict[str, Any] = {
        "format": DECISION_FORMAT,
        "instance": decision.instance,
        "solver": decision.solver,
        "status": decision.status.value,
        "objective": decision.objective,
        "bound": decision.bound,
        "gap": round(decision.gap, 6),
        "wall_s": round(decision.wall_s, 4),
        "horizon_s": decision.horizon_s,
        "jobs": [_job_dict(item) for item in decision.jobs],
    }
    if decision.stats:
        out["stats"] = dict(decision.stats)
    return out


def _job_dict(item: JobDecision) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.id, "action": item.action.value}
    if item.action is Action.START:
        out["gpus"] = list(item.gpu_ids)
    if item.start_s is not None:
        out["start_s"] = item.start_s
    if item.end_s is not None:
        out["end_s"] = item.end_s
    if item.action is Action.PLANNED:
        out["nodes"] = list(item.nodes)
        out["node_gpus"] = list(item.node_gpus)
    elif item.nodes:  # a CPU-only job started: its node, as it holds no GPU
        out["nodes"] = list(item.nodes)
    if item.reason is not None:
        out["reason"] = item.reason
    if item.dropped:
        out["dropped"] = [
            {"preference": preference, "reason": reason} for preference, reason in item.dropped
        ]
    return out


def decision_from_dict(raw: Any, source: str = "<decision>") -> Decision:
    """Validate and build a :class:`Decision` from parsed decision@1 JSON."""
    _check_format(raw, DECISION_FORMAT, source)
    _validate(raw, "decision", source)
    jobs = tuple(
        JobDecision(
            id=spec["id"],
            action=Action(spec["action"]),
            gpu_ids=tuple(spec.get("gpus", ())),
            start_s=spec.get("start_s"),
            end_s=spec.get("end_s"),
            nodes=tuple(spec.get("nodes", ())),
            node_gpus=tuple(spec.get("node_gpus", ())),
            reason=spec.get("reason"),
            dropped=tuple((d["preference"], d["reason"]) for d in spec.get("dropped", ())),
        )
        for spec in raw["jobs"]
    )
    return Decision(
        instance=raw["instance"],
        solver=raw["solver"],
        status=Status(raw["status"]),
        objective=raw["objective"],
        bound=raw["bound"],
        horizon_s=raw["horizon_s"],
        jobs=jobs,
        wall_s=raw.get("wall_s", 0.0),
        stats=dict(raw.get("stats", {})),
    )


def read_decision(path: str | Path) -> Decision:
    """Read a decision@1 file; raise :class:`InputError` on any problem."""
    return decision_from_dict(load_json(path), str(path))


def write_decision(path: str | Path, decision: Decision) -> None:
    """Write ``decision`` as a decision@1 file."""
    write_json(path, decision_to_dict(decision))
