"""The ``whale-opt`` command line: a thin skin over the library.

Every command is a library call a user could make from Python. Bad input
prints one line naming the file, the JSON path and the value, and exits 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from whale_opt.check import check
from whale_opt.decision import Action, Decision
from whale_opt.io import (
    InputError,
    decision_to_dict,
    read_decision,
    read_instance,
    schema,
    write_decision,
)
from whale_opt.policies import REGISTRY
from whale_opt.problem_data import FieldError, Instance
from whale_opt.solve import SOLVERS, solve

F = TypeVar("F", bound=Callable[..., Any])
EXIT_BAD_INPUT = 2
EXIT_INVALID = 1


def _input_errors(command: F) -> F:
    """Turn :class:`InputError` into one clear line and exit code 2."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


@click.group()
@click.version_option(package_name="whale-opt")
def main() -> None:
    """whale-opt: place GPU jobs on a cluster, round by round."""


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@_input_errors
def validate(files: tuple[Path, ...]) -> None:
    """Check instance or decision FILES against the published formats."""
    bad = 0
    for path in files:
        try:
            kind = _kind(path)
            if kind == "decision":
                read_decision(path)
            else:
                read_instance(path)
            click.echo(f"ok  {path} ({kind}@1)")
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            bad += 1
    if bad:
        sys.exit(EXIT_BAD_INPUT)


def _kind(path: Path) -> str:
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "instance"  # read_instance reports the precise problem
    fmt = raw.get("format", "") if isinstance(raw, dict) else ""
    return (
        "decision" if isinstance(fmt, str) and fmt.startswith("whale-opt/decision") else "instance"
    )


@main.command(name="solve")
@click.argument("instance_file", type=click.Path(path_type=Path))
@click.option(
    "--solver",
    default="wspt",
    show_default=True,
    type=click.Choice(sorted(SOLVERS)),
    help="Policy or solver to run.",
)
@click.option("--preset", default=None, help="CP-SAT parameter preset (solvers/<name>.toml).")
@click.option("--time-limit", type=float, default=None, help="Seconds; overrides the instance.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write decision@1 here.")
@click.option("--json", "as_json", is_flag=True, help="Print decision@1 JSON, not a table.")
@_input_errors
def solve_command(
    instance_file: Path,
    solver: str,
    preset: str | None,
    time_limit: float | None,
    output: Path | None,
    as_json: bool,
) -> None:
    """Decide one round for INSTANCE_FILE and print the placement."""
    instance = read_instance(instance_file)
    if output is not None and not output.parent.is_dir():
        _fail(output, "cannot write: no such directory")
    decision = solve(instance, solver=solver, preset=preset, time_limit_s=time_limit)
    if output is not None:
        try:
            write_decision(output, decision)
        except OSError as exc:
            _fail(output, f"cannot write: {exc.strerror or exc}")
    if as_json:
        click.echo(json.dumps(decision_to_dict(decision), indent=1))
    else:
        click.echo(render_table(instance, decision))


def _fail(path: Path, message: str) -> NoReturn:
    """Report an unusable output path on one line and exit 2, like bad input."""
    click.echo(f"error: {path}: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def render_table(instance: Instance, decision: Decision) -> str:
    """A readable summary: one line per queued job, then the round's figures."""
    lines = [f"{'job':<14} {'action':<9} {'start':>8} {'end':>9}  where / why"]
    for item in decision.jobs:
        if item.action in (Action.KEEP,):
            continue
        if item.action is Action.START:
            where = ",".join(item.gpus)
        elif item.action is Action.PLANNED:
            where = ",".join(f"{n}x{c}" for n, c in zip(item.nodes, item.node_gpus, strict=False))
        else:
            where = item.reason or ""
        start = "" if item.start_s is None else str(item.start_s)
        end = "" if item.end_s is None else str(item.end_s)
        lines.append(f"{item.id:<14} {item.action.value:<9} {start:>8} {end:>9}  {where}")
    counts = {a: len(decision.by_action(a)) for a in Action}
    lines.append("")
    lines.append(
        f"instance {decision.instance}  solver {decision.solver}  status {decision.status.value}"
    )
    lines.append(
        f"start {counts[Action.START]}  planned {counts[Action.PLANNED]}  deferred "
        f"{counts[Action.DEFERRED]}  keep {counts[Action.KEEP]}  preempt {counts[Action.PREEMPT]}"
    )
    lines.append(
        f"objective {decision.objective:.6g}  bound {decision.bound:.6g}  gap "
        f"{decision.gap:.2%}  wall {decision.wall_s:.3f}s"
    )
    return "\n".join(lines)


@main.command(name="check")
@click.argument("instance_file", type=click.Path(path_type=Path))
@click.argument("decision_file", type=click.Path(path_type=Path))
@_input_errors
def check_command(instance_file: Path, decision_file: Path) -> None:
    """Verify DECISION_FILE against INSTANCE_FILE; exit 1 naming every violation."""
    instance = read_instance(instance_file)
    decision = read_decision(decision_file)
    violations = check(instance, decision)
    for violation in violations:
        click.echo(str(violation))
    if violations:
        click.echo(f"{len(violations)} violation(s)", err=True)
        sys.exit(EXIT_INVALID)
    click.echo(f"ok  {decision_file}: valid for {instance_file} (objective {decision.objective:g})")


@main.command(name="schema")
@click.argument("kind", type=click.Choice(["instance", "decision"]))
def schema_command(kind: str) -> None:
    """Print the JSON Schema of an instance or decision file."""
    click.echo(json.dumps(schema(kind), indent=2))


@main.command(name="simulate")
@click.argument("trace_file", type=click.Path(path_type=Path))
@click.option(
    "--cluster",
    "cluster_file",
    required=True,
    type=click.Path(path_type=Path),
    help="instance@1 file with the nodes (empty queue and running).",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    default=("wspt",),
    show_default=True,
    type=click.Choice(sorted(REGISTRY)),
    help="Policy to replay; repeat to compare.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Directory for the CSV tables and PNG plots.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--round-period",
    type=int,
    default=300,
    show_default=True,
    help="Seconds between periodic rounds (0: none).",
)
@click.option(
    "--events/--no-events",
    default=True,
    show_default=True,
    help="A round after each arrival, completion, failure, repair.",
)
@click.option(
    "--batch",
    type=int,
    default=0,
    show_default=True,
    help="Event rounds gather the events of this many seconds.",
)
@click.option(
    "--noise",
    type=float,
    default=0.0,
    show_default=True,
    help="Log-normal sigma of actual / estimated duration.",
)
@click.option(
    "--checkpoint",
    type=int,
    default=3600,
    show_default=True,
    help="Checkpoint interval in run seconds (0: never).",
)
@click.option("--mtbf", type=float, default=None, help="Mean seconds between failures per node.")
@click.option("--repair", type=int, default=3600, show_default=True, help="Repair seconds.")
@click.option(
    "--failures",
    "failures_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Failure trace (TRACES.md): node, at_s, repair_s[, gpu].",
)
@click.option("--time-limit", type=float, default=None, help="Seconds per round (CP-SAT).")
@click.option("--preset", default=None, help="CP-SAT parameter preset.")
@click.option("--end", type=int, default=None, help="Stop at this simulated second.")
@click.option("--check", "check_rounds", is_flag=True, help="Check every round's decision.")
@_input_errors
def simulate_command(
    trace_file: Path,
    cluster_file: Path,
    policies: tuple[str, ...],
    output: Path,
    **options: Any,
) -> None:
    """Replay TRACE_FILE on a cluster under each --policy; write tables and plots."""
    from tqdm import tqdm

    from whale_opt.sim import SimConfig, read_outages, read_trace, simulate
    from whale_opt.sim.metrics import compare, summary_table
    from whale_opt.sim.plots import plot_all

    trace = read_trace(trace_file)
    cluster = read_instance(cluster_file)
    failures = options["failures_file"]
    outages = read_outages(failures) if failures is not None else ()
    results = []
    for name in dict.fromkeys(policies):
        try:
            config = SimConfig(
                policy=name,
                preset=options["preset"],
                time_limit_s=options["time_limit"],
                round_period_s=options["round_period"] or None,
                round_on_events=options["events"],
                round_batch_s=options["batch"],
                seed=options["seed"],
                duration_noise_sigma=options["noise"],
                checkpoint_interval_s=options["checkpoint"] or None,
                mtbf_node_s=options["mtbf"],
                repair_s=options["repair"],
                outages=outages,
                end_s=options["end"],
                check_decisions=options["check_rounds"],
            )
            with tqdm(total=len(trace), desc=name, unit="job", leave=False) as bar:
                result = simulate(trace, cluster, config, progress=lambda n: bar.update(n - bar.n))
        except (FieldError, ValueError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        result.write(output)
        results.append(result)
    compare(results).to_csv(output / "summary.csv")
    plot_all(results, output)
    click.echo(summary_table(results))
    click.echo(f"tables and plots in {output}/")


if __name__ == "__main__":  # pragma: no cover
    main()
