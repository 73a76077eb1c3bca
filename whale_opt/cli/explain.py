"""``whale-opt explain`` and ``whale-opt whatif``: why jobs wait, and what a change does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from whale_opt.cli.app import (
    EXIT_BAD_INPUT,
    _input_errors,
    main,
    time_limit_option,
    with_time_limit,
)
from whale_opt.explain import Change, explain, read_jobs, whatif
from whale_opt.io import read_round
from whale_opt.problem_data import FieldError
from whale_opt.solve import SOLVERS

_SOLVER = click.option(
    "--solver",
    default="wspt",
    show_default=True,
    type=click.Choice(sorted(SOLVERS)),
    help="Policy or solver whose decision is explained.",
)


def _bad(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


@main.command(name="explain")
@click.argument("instance_file", type=click.Path(path_type=Path))
@click.argument("job_ids", nargs=-1)
@_SOLVER
@click.option("--no-whatif", is_flag=True, help="Skip the counterfactual re-solves.")
@time_limit_option(
    "Seconds per solve, overriding the file's. A run solves once, then once per"
    " counterfactual it tries (several per job explained), so it can take many"
    " times this; --no-whatif solves once."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, not text.")
@_input_errors
def explain_command(
    instance_file: Path,
    job_ids: tuple[str, ...],
    solver: str,
    no_whatif: bool,
    time_limit: float | None,
    as_json: bool,
) -> None:
    """Why each job of INSTANCE_FILE not started (or each JOB_ID) waits, and what would start it.

    Each counterfactual is verified by solving again, each solve under the
    time limit (the file's, or --time-limit).
    """
    instance, options = read_round(instance_file)
    options = with_time_limit(options, time_limit)
    queued = {job.id for job in instance.queue}
    unknown = [job_id for job_id in job_ids if job_id not in queued]
    if unknown:
        _bad(f"{instance_file}: no queued job {', '.join(unknown)}")
    found = explain(
        instance,
        list(job_ids) or None,
        solver,
        with_counterfactuals=not no_whatif,
        options=options,
    )
    if as_json:
        click.echo(json.dumps([e.to_dict() for e in found], indent=1))
    elif not found:
        click.echo("every queued job starts now")
    else:
        click.echo("\n\n".join(e.render() for e in found))


@main.command(name="whatif")
@click.argument("instance_file", type=click.Path(path_type=Path))
@click.option(
    "--add-job",
    "add_job",
    type=click.Path(path_type=Path),
    help='JSON file of queue items to add: a list, or {"queue": [...]}.',
)
@click.option("--fail-node", default=None, help="Node id that goes down.")
@click.option("--drain", default=None, help="Node id that takes no new work.")
@click.option("--quota", default=None, help="TENANT=N: set a tenant's GPU quota.")
@_SOLVER
@time_limit_option("Seconds per solve, overriding the file's (a run solves twice).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, not text.")
@_input_errors
def whatif_command(
    instance_file: Path,
    add_job: Path | None,
    fail_node: str | None,
    drain: str | None,
    quota: str | None,
    solver: str,
    time_limit: float | None,
    as_json: bool,
) -> None:
    """Re-solve INSTANCE_FILE after one change and print what differs.

    Two solves, before and after the change, each under the time limit (the
    file's, or --time-limit). A failed node's running jobs are lost and
    requeued from their last checkpoint, paying their restore time.
    """
    given = [x for x in (add_job, fail_node, drain, quota) if x is not None]
    if len(given) != 1:
        _bad("give exactly one of --add-job, --fail-node, --drain, --quota")
    instance, options = read_round(instance_file)
    options = with_time_limit(options, time_limit)
    if add_job is not None:
        change = Change("add-jobs", jobs=read_jobs(add_job, into=instance))
    elif fail_node is not None:
        change = Change("fail-node", fail_node)
    elif drain is not None:
        change = Change("drain", drain)
    else:
        tenant, _, number = (quota or "").partition("=")
        if not tenant or not number.isdigit():
            _bad(f"--quota: expected TENANT=N (got {quota!r})")
        change = Change("quota", tenant, int(number))
    try:
        result = whatif(instance, change, solver, options)
    except FieldError as exc:
        _bad(f"{change.describe()}: {exc}")
        return
    click.echo(json.dumps(result.to_dict(), indent=1) if as_json else result.render())
