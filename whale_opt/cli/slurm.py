"""``whale-opt slurm``: run the Slurm bridge's controller loop (docs/SLURM.md)."""

from __future__ import annotations

import logging
import sys

import click

from whale_opt.cli.app import EXIT_BAD_INPUT, main
from whale_opt.problem_data import FieldError, GpuType, Policy
from whale_opt.registry import REGISTRY


def _gpu_type(text: str) -> GpuType:
    """``NAME=MEMORY_GB[:SPEED]`` -> :class:`GpuType`."""
    name, sep, rest = text.partition("=")
    memory, _, speed = rest.partition(":")
    try:
        if not sep:
            raise ValueError("expected NAME=MEMORY_GB[:SPEED]")
        return GpuType(name, float(memory), float(speed) if speed else 1.0)
    except (ValueError, FieldError) as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="--gpu-type") from exc


def _prices(texts: tuple[str, ...]) -> Policy:
    """``NAME=PRICE`` pairs -> the rounds' :class:`Policy` with those GPU-second prices."""
    prices: dict[str, float] = {}
    for text in texts:
        name, sep, price = text.partition("=")
        try:
            if not sep:
                raise ValueError("expected NAME=PRICE")
            prices[name] = float(price)
        except ValueError as exc:
            raise click.BadParameter(f"{text!r}: {exc}", param_hint="--gpu-second-price") from exc
    try:
        return Policy(gpu_second_prices=tuple(prices.items()))
    except FieldError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu-second-price") from exc


@main.command(name="slurm")
@click.option("--once", is_flag=True, help="Run one round and exit (1 if Slurm is unreachable).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between rounds.",
)
@click.option(
    "--solver",
    type=click.Choice(sorted(REGISTRY)),
    default="cpsat",
    show_default=True,
    help="whale_opt solver or policy that decides each round.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Solve time limit per round, in seconds.",
)
@click.option(
    "--gres-mode",
    type=click.Choice(["plain", "indexed"]),
    default="plain",
    show_default=True,
    help="plain: Slurm picks GPU indices on the chosen node; indexed: nodes offer "
    "gpu:g0:1..gpu:gN:1 and whale_opt's exact indices are enforced.",
)
@click.option("--dry-run", is_flag=True, help="Decide and log the commands; change nothing.")
@click.option("--partition", default=None, help="Manage only this partition (default: all).")
@click.option(
    "--preempt/--no-preempt",
    default=False,
    show_default=True,
    help="Let whale_opt preempt requeueable jobs (scontrol requeuehold).",
)
@click.option(
    "--default-duration",
    type=click.IntRange(min=1),
    default=3600,
    show_default=True,
    help="Duration estimate (s) of a job without a time limit.",
)
@click.option(
    "--gpu-type",
    "gpu_types",
    multiple=True,
    metavar="NAME=GB[:SPEED]",
    help="GPU memory and speed of a GPU type (repeatable; others: 80 GB, speed 1).",
)
@click.option(
    "--gpu-second-price",
    "gpu_second_prices",
    multiple=True,
    metavar="NAME=PRICE",
    help="Weighted seconds charged per GPU-second on a type (repeatable; README: "
    "pricing a scarce GPU type).",
)
@click.option(
    "--command-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds any one Slurm command may take.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every command.")
def slurm_command(
    once: bool,
    interval: float,
    solver: str,
    time_limit: float,
    gres_mode: str,
    dry_run: bool,
    partition: str | None,
    preempt: bool,
    default_duration: int,
    gpu_types: tuple[str, ...],
    gpu_second_prices: tuple[str, ...],
    command_timeout: float,
    verbose: bool,
) -> None:
    """Place held Slurm jobs with whale_opt, round by round (Ctrl-C stops)."""
    from whale_opt.slurm import BridgeOptions, SlurmController, SlurmRunner

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    catalog = {kind.name: kind for kind in map(_gpu_type, gpu_types)}
    policy = _prices(gpu_second_prices)
    try:
        options = BridgeOptions(
            gres_mode=gres_mode,
            partition=partition,
            gpu_types=catalog,
            default_duration_s=default_duration,
            allow_preemption=preempt,
        )
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    controller = SlurmController(
        SlurmRunner(timeout_s=command_timeout),
        options,
        solver=solver,
        time_limit_s=time_limit,
        dry_run=dry_run,
        policy=policy,
    )
    try:
        code = controller.run(interval_s=interval, once=once)
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)
