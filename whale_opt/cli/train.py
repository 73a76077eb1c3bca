"""``whale-opt train``: train the ``learned`` policy (MaskablePPO) on synthetic traces."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from whale_opt.cli.app import EXIT_BAD_INPUT, OutputPath, _input_errors, main
from whale_opt.io.files import output_folder
from whale_opt.problem_data import FieldError

DEFAULT_OUT = Path("runs") / "learned"
OPTION_OF = {"n_jobs": "--jobs", "queue_slots": "--slots"}  # TrainConfig field -> option


def _seeds(text: str) -> tuple[int, ...]:
    """``1-5`` or ``1,2,7`` -> seeds; FieldError naming ``--trace-seeds`` otherwise."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            first, last = int(low), int(high or low)
            if last < first:
                raise ValueError(part)
            seeds.extend(range(first, last + 1))
    except ValueError:
        raise FieldError("--trace-seeds", text, "must look like 1-5 or 1,2,7") from None
    return tuple(seeds)


@main.command(name="train")
@click.option(
    "--cluster",
    default="a100-4x8",
    show_default=True,
    help="a100-4x8, hetero-64, or an instance@1 file whose nodes to train on.",
)
@click.option(
    "--trace-seeds",
    default="1-5",
    show_default=True,
    help="Seeds of the synthetic training traces (one environment each): 1-5 or 1,2,7.",
)
@click.option("--jobs", type=int, default=128, show_default=True, help="Jobs per trace.")
@click.option("--load", type=float, default=1.2, show_default=True, help="Offered load.")
@click.option(
    "--timesteps", type=int, default=250_000, show_default=True, help="Environment steps."
)
@click.option("--slots", type=int, default=8, show_default=True, help="K, queued jobs shown.")
@click.option("--seed", type=int, default=0, show_default=True, help="Network and PPO seed.")
@click.option(
    "--checkpoint-every",
    type=int,
    default=50_000,
    show_default=True,
    help="Steps between checkpoints (0: only the final model).",
)
@click.option(
    "-o",
    "--out",
    type=OutputPath(),
    default=DEFAULT_OUT,
    show_default=True,
    help="Directory for model.zip (+ .json), checkpoints/, curve.csv, curve.png, train.json.",
)
@_input_errors
def train_command(
    cluster: str,
    trace_seeds: str,
    jobs: int,
    load: float,
    timesteps: int,
    slots: int,
    seed: int,
    checkpoint_every: int,
    out: Path,
) -> None:
    """Train the learned policy with MaskablePPO; the model is what ``--policy learned`` loads.

    Point the policy at it with WHALE_OPT_LEARNED=OUT/model.zip (OUT defaults
    to runs/learned, where the policy looks without it).
    """
    try:
        from tqdm import tqdm

        from whale_opt.gym.train import TrainConfig, load_cluster, plot_curve, train
    except ImportError as exc:
        click.echo(f"error: whale-opt train needs pip install 'whale-opt[rl]' ({exc})", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        config = TrainConfig(
            cluster=cluster,
            trace_seeds=_seeds(trace_seeds),
            n_jobs=jobs,
            load=load,
            timesteps=timesteps,
            queue_slots=slots,
            seed=seed,
            checkpoint_every=checkpoint_every,
        )
        load_cluster(cluster)  # a bad --cluster fails here, before anything is written
    except FieldError as exc:
        option = OPTION_OF.get(exc.path) or "--" + exc.path.lstrip("-").replace("_", "-")
        click.echo(f"error: {option}: {exc.message} (got {exc.value!r})", err=True)
        sys.exit(EXIT_BAD_INPUT)
    output_folder(out)  # a bad folder now, not after training
    with tqdm(total=timesteps, desc="train", unit="step") as bar:
        result = train(config, out, progress=lambda n: bar.update(n - bar.n))
    plot_curve(result.curve, out / "curve.png")
    click.echo(
        f"{result.timesteps} steps in {result.wall_s:.0f} s ({result.steps_per_s:.0f} steps/s);"
        f" model {result.model}, curve {out / 'curve.png'}"
    )
