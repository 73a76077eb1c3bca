"""What the solver pool runs: plain functions of picklable arguments.

Everything CPU-bound happens here, in a worker process (or thread), never on
the event loop: reading and validating an instance, solving, checking,
explaining, what-if. Bad input raises :class:`WorkError`, which crosses the
process boundary intact and becomes a 4xx answer. No FastAPI here: worker
processes import only the core library.
"""

from __future__ import annotations

import logging
from typing import Any

from whale_opt.check import check
from whale_opt.decision import Decision
from whale_opt.io import (
    InputError,
    decision_from_dict,
    decision_to_dict,
    instance_from_dict,
    instance_to_dict,
    options_from_dict,
)
from whale_opt.options import SolveOptions
from whale_opt.problem_data import FieldError, Instance, QueuedJob
from whale_opt.registry import REGISTRY
from whale_opt.solve import SPLIT_ABOVE_GPUS, solve

log = logging.getLogger("whale_opt")


class WorkError(Exception):
    """Bad input found in a worker: HTTP status, JSON path, message, value."""

    def __init__(self, status: int, path: str, message: str, value: Any = None) -> None:
        super().__init__(status, path, message, value)
        self.status = status
        self.path = path
        self.message = message
        self.value = value


def ping() -> bool:
    """Nothing: starts a worker (its imports) before the first request."""
    return True


def _located(where: str, exc: Exception) -> WorkError:
    if isinstance(exc, InputError):
        path = "" if exc.path == "(top level)" else exc.path
        return WorkError(422, _join(where, path), exc.message, exc.value)
    if isinstance(exc, FieldError):
        return WorkError(422, _join(where, exc.path), exc.message, exc.value)
    return WorkError(422, where, str(exc))


def _join(where: str, path: str) -> str:
    if not where or not path:
        return where or path
    return where + path if path.startswith("[") else f"{where}.{path}"


def known_solver(solver: str) -> None:
    """Raise a 422 unless ``solver`` is a registered policy name."""
    if solver not in REGISTRY:
        raise WorkError(422, "solver", f"unknown solver; choose from {', '.join(REGISTRY)}", solver)


def parse_instance(raw: Any, where: str = "instance") -> tuple[Instance, SolveOptions]:
    """An instance@1 object as an :class:`Instance` and its run settings."""
    try:
        return instance_from_dict(raw, where), options_from_dict(raw, where)
    except (InputError, FieldError) as exc:
        raise _located(where, exc) from None


def probe_base(instance: Instance) -> dict[str, Any]:
    """``instance`` as instance@1 with one node, no jobs: what queue items are checked in."""
    raw = instance_to_dict(instance)
    raw.update(nodes=raw["nodes"][:1], running=[], queue=[])
    return raw


def queue_items(
    items: list[Any], base: dict[str, Any], where: str, single: bool = False
) -> tuple[QueuedJob, ...]:
    """instance@1 queue items checked against ``base`` (see :func:`probe_base`): the
    schema, known GPU types and priority classes. Error paths start with
    ``where[k]`` (``where`` alone for a ``single`` item)."""
    try:
        return instance_from_dict({**base, "queue": items}, where).queue
    except (InputError, FieldError) as exc:
        path = exc.path
        if path.startswith("queue"):
            rest = path[len("queue") :]
            if single and rest.startswith("[0]"):
                rest = rest[len("[0]") :]
            path = where + rest
        message = exc.message
        value = exc.value
        raise WorkError(422, path, message, value) from None


def solve_file(
    raw: Any, solver: str, preset: str | None, time_limit_s: float | None, cap_s: float
) -> dict[str, Any]:
    """Solve an instance@1 object; the decision@1 object."""
    known_solver(solver)
    instance, options = parse_instance(raw, "")
    limit = min(time_limit_s if time_limit_s is not None else options.time_limit_s, cap_s)
    try:
        decision = solve(instance, solver, options, preset=preset, time_limit_s=limit)
    except (FieldError, ValueError) as exc:
        raise _located("", exc) from None
    return decision_to_dict(decision)


def solve_round(
    instance: Instance,
    solver: str,
    options: SolveOptions,
    time_limit_s: float,
    split_above_gpus: int | None = SPLIT_ABOVE_GPUS,
) -> Decision:
    """One round of a cluster, as :meth:`whale_opt.scheduler.Scheduler.propose` decides it."""
    return solve(
        instance, solver, options, time_limit_s=time_limit_s, split_above_gpus=split_above_gpus
    )


def check_files(raw_instance: Any, raw_decision: Any) -> dict[str, Any]:
    """The checker's verdict on a decision@1 object for an instance@1 object."""
    instance, _ = parse_instance(raw_instance)
    try:
        decision = decision_from_dict(raw_decision, "decision")
    except InputError as exc:
        raise _located("decision", exc) from None
    violations = check(instance, decision)
    return {
        "ok": not violations,
        "violations": [{"job": v.job, "kind": v.kind, "message": v.message} for v in violations],
    }


def _capped(options: SolveOptions, cap_s: float) -> SolveOptions:
    """The instance's own options, its time limit capped by the server's."""
    return options.replace(time_limit_s=min(options.time_limit_s, cap_s))


def explain_file(
    raw: Any, jobs: list[str] | None, solver: str, counterfactuals: bool, cap_s: float
) -> list[dict[str, Any]]:
    """Why the jobs of an instance@1 object wait (every job not started by default);
    each solve under the instance's time limit, capped at ``cap_s``."""
    from whale_opt.explain import explain

    known_solver(solver)
    instance, options = parse_instance(raw)
    queued = set(instance.queue_index)
    for k, job_id in enumerate(jobs or ()):
        if job_id not in queued:
            raise WorkError(404, f"jobs[{k}]", "is not a queued job of the instance", job_id)
    try:
        found = explain(
            instance,
            jobs,
            solver,
            with_counterfactuals=counterfactuals,
            options=_capped(options, cap_s),
        )
    except (FieldError, ValueError) as exc:
        raise _located("", exc) from None
    return [item.to_dict() for item in found]


def explain_job(instance: Instance, job_id: str) -> list[str]:
    """The reasons (in words) why queued job ``job_id`` of ``instance`` waits."""
    from whale_opt.explain import explain

    found = explain(instance, [job_id], "wspt", with_counterfactuals=False)
    return [reason.message for item in found for reason in item.reasons]


def whatif_file(raw: Any, change: dict[str, Any], solver: str, cap_s: float) -> dict[str, Any]:
    """Re-solve an instance@1 object after one change; the differences (each solve
    under the instance's time limit, capped at ``cap_s``)."""
    from whale_opt.explain import Change, whatif

    known_solver(solver)
    instance, options = parse_instance(raw)
    kind = change["kind"]
    value = change.get("value")
    jobs: tuple[Any, ...] = ()
    if kind == "add-jobs":
        jobs = queue_items(change.get("jobs") or [], probe_base(instance), "change.jobs")
        if not jobs:
            raise WorkError(422, "change.jobs", "add-jobs needs at least one queue item", [])
    elif kind in ("gpu-types", "preempt"):
        value = (value,) if isinstance(value, str) else value or ()
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise WorkError(422, "change.value", f"{kind} takes a list of names", value)
        value = tuple(value)
    try:
        edit = Change(kind, change.get("target") or "", value, jobs)
        return whatif(instance, edit, solver, _capped(options, cap_s)).to_dict()
    except FieldError as exc:
        # An add-jobs error names the job by its index in change.jobs.
        raise _located("change.jobs" if kind == "add-jobs" else "change", exc) from None
    except KeyError as exc:
        raise WorkError(404, "change.target", "names nothing in the instance", str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise WorkError(422, "change", str(exc), change.get("value")) from None
