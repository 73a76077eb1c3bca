"""``whale-opt pack``: the FGD packing study on the openb traces, beside its published numbers."""

from __future__ import annotations

from pathlib import Path

import click

from whale_opt.cli.app import EXIT_BAD_INPUT, OutputPath, _fail, _input_errors, main, require_file
from whale_opt.io.files import output_folder

DEFAULT_DATA = Path("../shared/data/traces")
PUBLISHED_NAMES = ("Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD")
OUR_NAMES = ("frag-aware", "cpsat-b1", "cpsat-b16", "cpsat-b64", "cpsat-b256")
POLICY_NAMES = PUBLISHED_NAMES + OUR_NAMES
GROUPS = {"published": PUBLISHED_NAMES, "ours": OUR_NAMES, "all": POLICY_NAMES}


def _policies(given: tuple[str, ...]) -> list[str]:
    """Policy names in the study's order; nothing means the six published ones.

    ``published`` is the six, ``ours`` is frag-aware and the cpsat rounds,
    ``all`` is both.
    """
    wanted: set[str] = set()
    for name in given or ("published",):
        wanted.update(GROUPS.get(name, (name,)))
    return [p for p in POLICY_NAMES if p in wanted]


def _traces(given: tuple[str, ...], folder: Path) -> list[str]:
    """Trace names; ``all`` means every trace with published numbers. Exit 2 on an unknown one."""
    from whale_opt.pack.published import PUBLISHED_TRACES
    from whale_opt.pack.trace import pod_file

    names = list(dict.fromkeys(PUBLISHED_TRACES if "all" in given else given or ("default",)))
    for name in names:
        if not (folder / pod_file(name)).is_file():
            here = sorted(
                p.name.removeprefix("openb_pod_list_").removesuffix(".csv")
                for p in folder.glob("openb_pod_list_*.csv")
            )
            known = ", ".join(here) if here else "none"
            click.echo(
                f"error: --trace: unknown trace {name!r}: no {folder / pod_file(name)} "
                f"(traces there: {known})",
                err=True,
            )
            raise SystemExit(EXIT_BAD_INPUT)
    return names


@main.command(name="pack")
@click.option(
    "--trace",
    "traces",
    multiple=True,
    help="openb pod list (default, gpushare40, multigpu20, gpuspec10, cpu050, ...; "
    "repeat to run several; 'all': every trace with published numbers). Default: default.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice([*POLICY_NAMES, *GROUPS], case_sensitive=False),
    help="Policy to run; repeat to run several. 'published': the paper's six (the default); "
    "'ours': frag-aware and cpsat-bN (CP-SAT placing N arriving pods at once); 'all': both.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Runs per trace and policy, one per seed.",
)
@click.option("--first-seed", type=int, default=42, show_default=True, help="Seeds are N, N+1, ...")
@click.option(
    "--load",
    type=click.FloatRange(min=0, min_open=True),
    default=1.3,
    show_default=True,
    help="Resize each pod list to this multiple of the cluster's GPU capacity.",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    default=DEFAULT_DATA,
    show_default=True,
    help="Folder of the public traces; the openb CSVs are in its alibaba-gpu-v2023/.",
)
@click.option(
    "--nodes",
    type=click.Path(path_type=Path),
    default=None,
    help="Node list CSV (default: openb_node_list_gpu_node.csv beside the pod lists).",
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(),
    default=Path("results/pack"),
    show_default=True,
    help="Directory for curves.csv, seeds.csv, table.md and packing-<trace>.png.",
)
@_input_errors
def pack_command(
    traces: tuple[str, ...],
    policies: tuple[str, ...],
    seeds: int,
    first_seed: int,
    load: float,
    data: Path,
    nodes: Path | None,
    output: Path,
) -> None:
    """Reproduce the packing study of the FGD paper (ATC '23) on the openb traces.

    Each run shuffles a pod list with a seed, resizes it to --load x the
    cluster's GPU capacity, offers the pods one at a time (a pod that fits
    nowhere is dropped) and records unallocated GPU % against arrived
    workload. Prints unallocated % at arrived = 100% (mean ± sd over the
    seeds) beside the published means, and writes the curves, the table and
    one plot per trace to --output.
    """
    from tqdm import tqdm

    from whale_opt.pack.experiment import combine, run_once
    from whale_opt.pack.report import markdown_table, timing_table, write_all
    from whale_opt.pack.trace import NODE_FILE, TRACE_FOLDER, pod_file, read_cluster, read_pods

    folder = data / TRACE_FOLDER
    node_file = nodes if nodes is not None else folder / NODE_FILE
    require_file(node_file, "give --nodes FILE, or --data DIR")
    names = _traces(traces, folder)
    chosen = _policies(policies)
    output_folder(output)  # before the runs, not after them
    cluster = read_cluster(node_file)
    seed_list = tuple(range(first_seed, first_seed + seeds))
    results = []
    with tqdm(total=len(names) * len(chosen) * seeds, unit="run", desc="pack") as bar:
        for trace in names:
            pods = read_pods(folder / pod_file(trace))
            for policy in chosen:
                runs = []
                for seed in seed_list:
                    bar.set_postfix_str(f"{trace} {policy} seed {seed}")
                    runs.append(run_once(cluster, pods, policy, seed, load))
                    bar.update()
                results.append(combine(trace, policy, seed_list, runs))
    try:
        write_all(results, output)
    except OSError as exc:
        _fail(output, f"cannot write: {exc.strerror or exc}")
    click.echo("Unallocated GPU % at arrived = 100%: ours (mean ± sd) / published (difference)")
    click.echo(markdown_table(results))
    click.echo("Seconds per trace x policy (all seeds):")
    click.echo(timing_table(results))
    click.echo(f"curves, table and plots in {output}/")
