"""The ``whale-opt`` group, its shared error handling, and the round commands
(``validate``, ``solve``, ``check``, ``schema``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from concurrent.futures import Executor
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from whale_opt.check import check
from whale_opt.cpsat.presets import preset_names
from whale_opt.decision import Action, Decision
from whale_opt.executors import EXECUTORS, make_executor
from whale_opt.io import (
    InputError,
    decision_to_dict,
    read_decision,
    read_instance,
    read_round,
    schema,
    write_decision,
)
from whale_opt.io.files import output_file
from whale_opt.options import SolveOptions
from whale_opt.problem_data import FieldError, Instance
from whale_opt.solve import SOLVERS, solve

F = TypeVar("F", bound=Callable[..., Any])
EXIT_BAD_INPUT = 2
# Trace files (TRACES.md): never an instance or a decision.
TRACE_SUFFIXES = (".jsonl", ".ndjson", ".csv")
EXIT_INVALID = 1


def _input_errors(command: F) -> F:
    """Turn :class:`InputError` (a bad file) and :class:`FieldError` (a bad option
    value, such as an unknown ``--preset``) into one clear line and exit code 2."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (InputError, FieldError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


class _OneLineError(click.ClickException):
    """A bad option value click itself finds, said as :func:`_input_errors` says one."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


class OutputPath(click.Path):
    """Where a command writes (a file or a folder), as a :class:`~pathlib.Path`.

    An empty value is refused here: it would become ``Path(".")``, the current
    folder, and no later check could tell it from ``-o .``.
    """

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            option = "/".join(param.opts) if param is not None else "path"
            raise _OneLineError(f"{option}: is empty: give a path to write (got {value!r})")
        return super().convert(value, param, ctx)


@click.group()
@click.version_option(package_name="whale-opt")
def main() -> None:
    """whale-opt: place GPU jobs on a cluster, round by round."""


def time_limit_option(help_text: str = "Seconds; overrides the instance.") -> Callable[[F], F]:
    """``--time-limit S``: seconds per solve, overriding the file's (checked by
    :func:`with_time_limit`)."""
    return click.option("--time-limit", type=float, default=None, help=help_text)


def with_time_limit(options: SolveOptions, time_limit: float | None) -> SolveOptions:
    """``options`` with ``--time-limit`` applied (unchanged when not given).

    Raises FieldError naming ``--time-limit`` when it is not a number > 0.
    """
    if time_limit is None:
        return options
    try:
        return options.replace(time_limit_s=time_limit)
    except FieldError as exc:
        raise FieldError("--time-limit", exc.value, exc.message) from None


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@_input_errors
def validate(files: tuple[Path, ...]) -> None:
    """Check instance or decision FILES against the published formats."""
    bad = 0
    for path in files:
        try:
            if path.suffix.lower() in TRACE_SUFFIXES:
                raise InputError(
                    str(path),
                    "(file)",
                    f"a {path.suffix} file is a job or failure trace (TRACES.md), not an"
                    " instance or decision file: validate checks instance@1 and decision@1 JSON",
                )
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
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return "instance"  # read_instance reports the precise problem
    fmt = raw.get("format", "") if isinstance(raw, dict) else ""
    return (
        "decision" if isinstance(fmt, str) and fmt.startswith("whale-opt/decision") else "instance"
    )


def _executor(kind: str, address: str) -> Executor | None:
    """The executor ``--executor`` names; exit 2 when Ray is missing or unreachable."""
    try:
        return make_executor(kind, address)
    except ImportError:
        _fail(Path(kind), "Ray is not installed: pip install 'whale-opt[ray]'")
    except ConnectionError as exc:
        # Ray's own hint names its `--address` flag; ours is --ray-address.
        reason = str(exc).partition(" Please specify")[0].rstrip(".")
        _fail(
            Path(address),
            f"cannot reach the Ray cluster: {reason}; give --ray-address host:port"
            " or ray://host:10001 (or set RAY_ADDRESS)",
        )
    return None


@main.command(name="solve")
@click.argument("instance_file", type=click.Path(path_type=Path))
@click.option(
    "--solver",
    default="cpsat",
    show_default=True,
    type=click.Choice(sorted(SOLVERS)),
    help="Policy or solver to run (wspt: the greedy alone).",
)
@click.option(
    "--preset",
    default=None,
    help=f"CP-SAT parameter preset: {', '.join(preset_names())} (default: default).",
)
@time_limit_option()
@click.option("-o", "--output", type=OutputPath(), help="Write decision@1 here.")
@click.option("--json", "as_json", is_flag=True, help="Print decision@1 JSON, not a table.")
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where the pools of a split round are solved (ray: needs whale-opt[ray]).",
)
@click.option(
    "--ray-address",
    default="auto",
    show_default=True,
    help="With --executor ray: the cluster (auto, host:port, ray://host:10001).",
)
@_input_errors
def solve_command(
    instance_file: Path,
    solver: str,
    preset: str | None,
    time_limit: float | None,
    output: Path | None,
    as_json: bool,
    executor: str,
    ray_address: str,
) -> None:
    """Decide one round for INSTANCE_FILE and print the placement."""
    instance, options = read_round(instance_file)
    options = with_time_limit(options, time_limit)
    if output is not None:
        output_file(output, [instance_file])
    pool = _executor(executor, ray_address)
    try:
        decision = solve(instance, solver, options, preset=preset, executor=pool)
    finally:
        if pool is not None:
            pool.shutdown()
    if output is not None:
        try:
            write_decision(output, decision)
        except OSError as exc:
            _fail(output, f"cannot write: {exc.strerror or exc}")
    if as_json:
        click.echo(json.dumps(decision_to_dict(decision), indent=1))
    else:
        click.echo(render_table(instance, decision))


def require_file(path: Path, hint: str) -> None:
    """Exit 2 unless ``path`` is a readable file: it is missing, or a folder
    (``hint`` says what to give instead)."""
    if path.is_dir():
        _fail(path, f"cannot read: is a folder, not a file ({hint})")
    if not path.is_file():
        _fail(path, f"cannot read: no such file ({hint})")


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
            where = ",".join(item.gpu_ids)
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
        + (f"  lost {counts[Action.LOST]}" if counts[Action.LOST] else "")
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
