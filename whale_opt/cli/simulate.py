"""``whale-opt simulate``: replay a trace under one or more policies."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import click

from whale_opt.cli.app import EXIT_BAD_INPUT, OutputPath, _fail, _input_errors, main
from whale_opt.io import read_instance
from whale_opt.io.files import build_in_file, output_folder
from whale_opt.problem_data import FieldError
from whale_opt.registry import REGISTRY


@dataclass(frozen=True)
class Ceiling:
    """A ``--max-wait`` given: seconds, or None for no ceiling."""

    seconds: int | None


class MaxWait(click.ParamType):
    """Whole seconds, or ``none``."""

    name = "seconds|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Ceiling):
            return value
        text = str(value).strip()
        if text.lower() == "none":
            return Ceiling(None)
        try:
            return Ceiling(int(text))
        except ValueError:
            self.fail(f"{value!r} is neither whole seconds nor 'none'", param, ctx)


# The option that set each policy or replay field, for errors the user can act on.
OPTION_OF = {
    "aging_per_hour": "--aging",
    "max_wait_s": "--max-wait",
    "time_limit_s": "--time-limit",
    "round_period_s": "--round-period",
    "round_batch_s": "--batch",
    "duration_noise_sigma": "--noise",
    "checkpoint_interval_s": "--checkpoint",
    "mtbf_node_s": "--mtbf",
    "repair_s": "--repair",
    "end_s": "--end",
}


def _bad_option(exc: FieldError) -> NoReturn:
    """Exit 2 with ``exc`` said of the option that set its field."""
    flag = OPTION_OF.get(exc.path, exc.path)
    click.echo(f"error: {flag}: {exc.message} (got {exc.value!r})", err=True)
    sys.exit(EXIT_BAD_INPUT)


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
    type=OutputPath(),
    default=Path("results"),
    show_default=True,
    help="Directory for the CSV tables and PNG plots.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--round-period",
    type=click.IntRange(min=0),
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
    type=click.IntRange(min=0),
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
    type=click.IntRange(min=0),
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
    help="Failure trace (TRACES.md): node, at_s, repair_s[, gpu][, kind fail|drain].",
)
@click.option(
    "--preemption/--no-preemption",
    default=None,
    help="Allow or forbid preemption (default: the cluster file's policy).",
)
@click.option(
    "--aging",
    type=float,
    default=None,
    help="Aging per hour waited (default: the cluster file's policy).",
)
@click.option(
    "--max-wait",
    type=MaxWait(),
    default=None,
    help="The wait ceiling, seconds or 'none' (default: the cluster file's policy).",
)
@click.option("--time-limit", type=float, default=None, help="Seconds per round (CP-SAT).")
@click.option("--preset", default=None, help="CP-SAT parameter preset.")
@click.option("--end", type=int, default=None, help="Stop at this simulated second.")
@click.option("--check", "check_rounds", is_flag=True, help="Check every round's decision.")
@click.option(
    "--floor",
    "with_floor",
    is_flag=True,
    help="Also bound every schedule's weighted JCT from below, and show each policy against it.",
)
@_input_errors
def simulate_command(
    trace_file: Path,
    cluster_file: Path,
    policies: tuple[str, ...],
    output: Path,
    **options: Any,
) -> None:
    """Replay TRACE_FILE on a cluster under each --policy; write tables and plots.

    Every input is checked before the first replay starts: the cluster file
    (no jobs), each trace and failure-trace line against the cluster (an
    error names the file, the line and the field), the options.
    """
    from tqdm import tqdm

    from whale_opt.sim import SimConfig, read_outages, read_trace, simulate
    from whale_opt.sim.engine import check_cluster
    from whale_opt.sim.floor import replay_floor
    from whale_opt.sim.metrics import compare, summary_table
    from whale_opt.sim.plots import plot_all

    cluster = read_instance(cluster_file)
    build_in_file(str(cluster_file), "", check_cluster, cluster)
    trace = read_trace(trace_file, cluster)
    changes: dict[str, Any] = {}
    if options["preemption"] is not None:
        changes["allow_preemption"] = options["preemption"]
    if options["aging"] is not None:
        changes["aging_per_hour"] = options["aging"]
    if options["max_wait"] is not None:
        changes["max_wait_s"] = options["max_wait"].seconds
    try:
        cluster = cluster.replace(policy=replace(cluster.policy, **changes))
    except FieldError as exc:
        _bad_option(exc)
    failures = options["failures_file"]
    outages = read_outages(failures, cluster) if failures is not None else ()
    try:
        config = SimConfig(
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
    except FieldError as exc:
        _bad_option(exc)
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    output_folder(output)  # a bad folder now, not after the replays
    results = []
    for name in dict.fromkeys(policies):
        try:
            with tqdm(total=len(trace), desc=name, unit="job", leave=False) as bar:
                result = simulate(
                    trace,
                    cluster,
                    replace(config, policy=name),
                    progress=lambda n: bar.update(n - bar.n),
                )
        except (FieldError, ValueError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        results.append(result)
    table = compare(results)
    floor = None
    if options["with_floor"]:  # the actual durations: the seed and the noise
        noise = SimConfig(seed=options["seed"], duration_noise_sigma=options["noise"])
        floor = replay_floor(trace, cluster, noise)
        table.loc["floor_weighted_jct_s"] = floor
    try:
        for result in results:
            result.write(output)
        table.to_csv(output / "summary.csv")
        plot_all(results, output)
    except OSError as exc:  # checked above; a full disk or a race remains
        _fail(output, f"cannot write: {exc.strerror or exc}")
    click.echo(summary_table(results))
    if floor is not None:
        click.echo(floor_lines(floor, results))
    click.echo(f"tables and plots in {output}/")


def floor_lines(floor: float, results: list[Any]) -> str:
    """The floor, and each policy's weighted JCT over it (:func:`over_floor`)."""
    from whale_opt.sim.floor import over_floor

    lines = [f"floor: {floor:,.0f} s weighted JCT; no schedule of this trace does better"]
    for result in results:
        summary = result.summary
        ratio = over_floor(summary, floor)
        if ratio is None:
            lines.append(
                f"  {result.policy}: {summary['completed']} of {summary['jobs']} jobs completed"
            )
        else:
            lines.append(f"  {result.policy}: x{ratio:.3f} the floor")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    main()
