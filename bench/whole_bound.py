"""Bounds on one generated round: the analytic, the Lagrangian and CP-SAT's own.

Why do 16-job rounds stay unproven? This prints, for one generated round, the
greedy's and cpsat's objectives beside the analytic bound, the Lagrangian bound
and the bound CP-SAT reaches on the whole round's model (every queued job freed)
within ``--limit`` seconds, under the default preset's parameters and each
``--variant`` (CP-SAT parameters over them, ``key=value,key=value``); with
``--fix-types``, also the bound once every job's GPU type is fixed to that
solution's (is the type choice what weakens the model's relaxation?). The
model is hinted with the greedy's decision, or with cpsat's (``--hint cpsat``:
how much is left to prove once the round's best decision is known?). A
parameter's value with ``+`` in it is a list (``subsolvers=default_lp+objective_lb_search``).

    PYTHONPATH=<clone> python <clone>/bench/whole_bound.py --family hetero --gpus 64 --seed 500 \
        --variant linearization_level=2 --variant num_workers=2 \
        --variant num_workers=2,num_full_subsolvers=2,subsolvers=default_lp+objective_lb_search
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ortools.sat.python import cp_model

from whale_opt.bounds import lagrangian_bound, lower_bound
from whale_opt.check import check
from whale_opt.cpsat.cpmodel import NeighbourhoodModel, new_solver, outside_cost
from whale_opt.cpsat.lns import whole_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.decision import objective
from whale_opt.generate import generate
from whale_opt.problem_data import Instance
from whale_opt.solve import solve, wspt_greedy

FOUND = (cp_model.OPTIMAL, cp_model.FEASIBLE)


def parse_variant(text: str) -> dict[str, Any]:
    """``key=value,key=value`` as CP-SAT parameters (ints, floats and booleans parsed;
    ``a+b`` a list of strings)."""
    parameters: dict[str, Any] = {}
    for pair in filter(None, text.split(",")):
        key, _, raw = pair.partition("=")
        value: Any = raw
        if raw in ("true", "false"):
            value = raw == "true"
        elif "+" in raw:
            value = raw.split("+")
        else:
            for kind in (int, float):
                try:
                    value = kind(raw)
                    break
                except ValueError:
                    pass
        parameters[key.strip()] = value
    return parameters


def round_parser(description: str, gpus: int, seed: int) -> argparse.ArgumentParser:
    """A parser with the generated round's options: ``--family``, ``--gpus``,
    ``--queued`` (16) and ``--seed``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--family", default="hetero")
    parser.add_argument("--gpus", type=int, default=gpus)
    parser.add_argument("--queued", type=int, default=16)
    parser.add_argument("--seed", type=int, default=seed)
    return parser


def one_round(args: argparse.Namespace) -> Instance:
    """The round :func:`round_parser`'s options name."""
    return generate(args.family, gpus=args.gpus, queued=args.queued, seed=args.seed)


def main() -> None:
    parser = round_parser(__doc__.splitlines()[0], gpus=64, seed=500)
    parser.add_argument("--limit", type=float, default=10.0, help="CP-SAT seconds a variant")
    parser.add_argument("--variant", action="append", default=[], help="key=value,...")
    parser.add_argument(
        "--fix-types", action="store_true", help="also solve with the types of each solution fixed"
    )
    parser.add_argument(
        "--hint", choices=("greedy", "cpsat"), default="greedy", help="the model's hint"
    )
    args = parser.parse_args()

    instance = one_round(args)
    greedy = wspt_greedy(instance)
    decision = solve(instance, "cpsat", time_limit_s=5)
    if check(instance, decision):
        raise SystemExit(f"{instance.name}: cpsat broke the rules")
    best = decision.objective
    print(
        f"{instance.name}: {len(instance.nodes)} nodes, {len(instance.running)} running, "
        f"{len(instance.queue)} queued"
    )
    status = decision.status.value
    print(f"greedy {objective(instance, greedy):,.0f}; cpsat 5 s {best:,.0f} ({status})")
    lagrangian = lagrangian_bound(instance, best, time.perf_counter() + 5.0)
    for name, bound in (("analytic", lower_bound(instance)), ("Lagrangian 5 s", lagrangian)):
        print(f"{name} bound {bound:,.0f} ({1 - bound / best:.1%} below cpsat)")
    preset = load_preset(None)
    hint = greedy if args.hint == "greedy" else list(decision.jobs)
    for variant in ["", *args.variant]:
        hood, _, _ = whole_neighbourhood(instance, hint)  # a model is solved once: built anew
        outside = outside_cost(hood)  # jobs no node can host: deferred in every decision
        built = NeighbourhoodModel(hood)
        parameters = {**preset.parameters, **parse_variant(variant)}
        solver, status = solve_model(built.model, parameters, args.limit)
        _report(f"CP-SAT {variant or 'as the preset'}", built, solver, status, outside, best)
        if args.fix_types and status in FOUND:
            # The same model with every job's GPU type (and deferral) fixed to that solution's.
            for v in built.variables.jobs:
                for lit in (v.deferred, *v.on_type.values()):
                    built.model.add(lit == solver.value(lit))
            fixed, status = solve_model(built.model, preset.parameters, args.limit)
            _report("  its types fixed", built, fixed, status, outside, best)


def solve_model(
    model: cp_model.CpModel, parameters: dict[str, Any], limit: float
) -> tuple[cp_model.CpSolver, Any]:
    """The solver after solving ``model`` (CP-SAT ``parameters``, ``limit`` seconds),
    and its status."""
    solver = new_solver(parameters)
    solver.parameters.max_time_in_seconds = limit
    return solver, solver.solve(model)


def _report(
    label: str,
    built: NeighbourhoodModel,
    solver: cp_model.CpSolver,
    status: Any,
    outside: float,
    best: float,
) -> None:
    bound = built.objective.bound(solver) + outside
    value = f"{built.objective.value(solver) + outside:,.0f}" if status in FOUND else "none"
    proved = status == cp_model.OPTIMAL
    print(
        f"{label}, {solver.wall_time:.1f} s: bound {bound:,.0f} "
        f"({1 - bound / best:.1%} below cpsat), best {value}{', proved' if proved else ''}"
    )


if __name__ == "__main__":
    main()
