"""``whale-opt import``: real cluster traces into our clusters and traces."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from whale_opt.cli.app import OutputPath, _fail, _input_errors, main, require_file
from whale_opt.io import read_instance
from whale_opt.io.files import output_file
from whale_opt.problem_data import Instance

DEFAULT_TRACES = Path("../shared/data/traces")


def _source(given: Path | None, data: Path, folder: str, name: str) -> Path:
    """The file the user named, else ``<data>/<folder>/<name>``; exit 2 if neither."""
    path = given if given is not None else data / folder / name
    require_file(path, "give its path, or --data DIR")
    return path


def _report(title: str, report: Any) -> None:
    from dataclasses import asdict

    counts = "  ".join(f"{key} {value}" for key, value in asdict(report).items())
    click.echo(f"{title}: {counts}")


def _assumptions(path: Path | None) -> Any:
    from whale_opt.convert import DEFAULT_ASSUMPTIONS, load_assumptions

    return DEFAULT_ASSUMPTIONS if path is None else load_assumptions(path)


def _write_outputs(
    cluster: Instance | None,
    out: Path | None,
    trace: Any,
    trace_out: Path | None,
    inputs: Sequence[Path | None],
) -> None:
    """Write the cluster and the trace: both, or on any failure neither.

    Both paths are checked before anything is written (:func:`output_file`:
    neither may be one of the ``inputs`` read); each file is written in
    a fresh hidden folder beside its target and moved into place only once
    all are written, so a failure leaves no half-made output (exit 2).
    """
    from whale_opt.io import write_instance
    from whale_opt.sim import write_trace
    from whale_opt.sim.trace import trace_format

    outputs: list[tuple[str, Path, Callable[[Path], None]]] = []
    if cluster is not None and out is not None:
        outputs.append(("cluster", out, lambda path: write_instance(path, cluster)))
    if trace is not None and trace_out is not None:
        trace_format(trace_out)  # an unknown suffix is an InputError, before any writing
        outputs.append(("trace", trace_out, lambda path: write_trace(path, trace)))
    for _, path, _ in outputs:
        output_file(path, [given for given in inputs if given is not None])
    if len({path.resolve() for _, path, _ in outputs}) < len(outputs):
        _fail(outputs[0][1], "cannot write the cluster and the trace to one file")
    staged: list[tuple[Path, Path]] = []
    try:
        for _, target, write in outputs:
            folder = Path(tempfile.mkdtemp(prefix=".whale-opt-", dir=target.parent))
            staged.append((folder, target))
            write(folder / target.name)
        for folder, target in staged:
            os.replace(folder / target.name, target)
    except OSError as exc:
        _fail(target, f"cannot write: {exc.strerror or exc}")
    finally:
        for folder, _ in staged:
            shutil.rmtree(folder, ignore_errors=True)
    for what, path, _ in outputs:
        click.echo(f"{what} -> {path}")


_data_option = click.option(
    "--data",
    type=click.Path(path_type=Path),
    default=DEFAULT_TRACES,
    show_default=True,
    help="Folder of the public traces (../shared/data/traces).",
)
_assumptions_option = click.option(
    "--assumptions",
    "assumptions_file",
    type=click.Path(path_type=Path),
    default=None,
    help="TOML overriding GPU models, QoS weights, rack size (docs/IMPORT.md).",
)
_cluster_out = click.option(
    "--cluster-out", type=OutputPath(), help="Write the instance@1 cluster here."
)
_trace_out = click.option(
    "--trace-out", type=OutputPath(), help="Write the job trace (.csv/.jsonl)."
)


@main.group(name="import")
def import_group() -> None:
    """Convert public traces into cluster files and job traces (docs/IMPORT.md)."""


@import_group.command(name="openb")
@_data_option
@click.option("--nodes", type=click.Path(path_type=Path), help="openb node list CSV.")
@click.option("--pods", type=click.Path(path_type=Path), help="openb pod list CSV.")
@_cluster_out
@_trace_out
@click.option(
    "--pending",
    type=click.Choice(["skip", "creation"]),
    default="skip",
    show_default=True,
    help="Pods never scheduled: skip, or run deletion - creation.",
)
@click.option(
    "--whole-gpus",
    is_flag=True,
    help="Round shares of a GPU up to a whole GPU and drop CPU-only pods "
    "(default: keep gpu_milli shares and CPU-only pods).",
)
@_assumptions_option
@_input_errors
def import_openb(
    data: Path,
    nodes: Path | None,
    pods: Path | None,
    cluster_out: Path | None,
    trace_out: Path | None,
    pending: str,
    whole_gpus: bool,
    assumptions_file: Path | None,
) -> None:
    """Alibaba GPU v2023 (openb): node list -> cluster, pod list -> trace."""
    from whale_opt.convert import read_openb_cluster, read_openb_trace

    assumptions = _assumptions(assumptions_file)
    folder = "alibaba-gpu-v2023"
    cluster = trace = None
    if cluster_out is None and trace_out is None:
        raise click.UsageError("nothing to write: give --cluster-out and/or --trace-out")
    read: list[Path | None] = [assumptions_file]
    if cluster_out is not None:
        source = _source(nodes, data, folder, "openb_node_list_gpu_node.csv")
        cluster, node_report = read_openb_cluster(source, assumptions)
        _report(f"nodes {source}", node_report)
        read.append(source)
    if trace_out is not None:
        source = _source(pods, data, folder, "openb_pod_list_default.csv")
        trace, pod_report = read_openb_trace(
            source, assumptions, pending=pending, whole_gpus=whole_gpus
        )
        _report(f"pods {source}", pod_report)
        read.append(source)
    _write_outputs(cluster, cluster_out, trace, trace_out, read)


@import_group.command(name="philly")
@_data_option
@click.option("--machines", type=click.Path(path_type=Path), help="cluster_machine_list.csv.")
@click.option("--jobs", type=click.Path(path_type=Path), help="jobs_ge4gpu_pass.json.")
@_cluster_out
@_trace_out
@_assumptions_option
@_input_errors
def import_philly(
    data: Path,
    machines: Path | None,
    jobs: Path | None,
    cluster_out: Path | None,
    trace_out: Path | None,
    assumptions_file: Path | None,
) -> None:
    """Microsoft Philly: machine list -> cluster, >=4-GPU job subset -> trace."""
    from whale_opt.convert import read_philly_cluster, read_philly_trace

    assumptions = _assumptions(assumptions_file)
    cluster = trace = None
    if cluster_out is None and trace_out is None:
        raise click.UsageError("nothing to write: give --cluster-out and/or --trace-out")
    read: list[Path | None] = [assumptions_file]
    if cluster_out is not None:
        source = _source(machines, data, "philly", "cluster_machine_list.csv")
        cluster, cluster_report = read_philly_cluster(source, assumptions)
        _report(f"machines {source}", cluster_report)
        read.append(source)
    if trace_out is not None:
        source = _source(jobs, data, "philly", "jobs_ge4gpu_pass.json")
        trace, trace_report = read_philly_trace(source, assumptions)
        _report(f"jobs {source}", trace_report)
        read.append(source)
    _write_outputs(cluster, cluster_out, trace, trace_out, read)


@import_group.command(name="pai")
@_data_option
@click.option("--machines", type=click.Path(path_type=Path), help="pai_machine_spec.csv.")
@click.option("--cluster-out", type=OutputPath(), required=True)
@_assumptions_option
@_input_errors
def import_pai(
    data: Path, machines: Path | None, cluster_out: Path, assumptions_file: Path | None
) -> None:
    """Alibaba PAI v2020: machine spec -> cluster."""
    from whale_opt.convert import read_pai_cluster

    source = _source(machines, data, "alibaba-gpu-v2020", "pai_machine_spec.csv")
    cluster, report = read_pai_cluster(source, _assumptions(assumptions_file))
    _report(f"machines {source}", report)
    _write_outputs(cluster, cluster_out, None, None, [source, assumptions_file])


@import_group.command(name="gavel")
@click.argument("trace_file", type=click.Path(path_type=Path))
@click.option("--cluster", "cluster_file", required=True, type=click.Path(path_type=Path))
@_data_option
@click.option("--throughputs", type=click.Path(path_type=Path), help="Gavel throughputs JSON.")
@click.option("--trace-out", type=OutputPath(), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@_assumptions_option
@_input_errors
def import_gavel(
    trace_file: Path,
    cluster_file: Path,
    data: Path,
    throughputs: Path | None,
    trace_out: Path,
    seed: int,
    assumptions_file: Path | None,
) -> None:
    """Give TRACE_FILE's jobs random Gavel classes: durations per GPU type of CLUSTER."""
    from whale_opt.convert import read_gavel, with_gavel_speeds
    from whale_opt.sim import read_trace

    source = _source(throughputs, data, "gavel", "simulation_throughputs.json")
    table = read_gavel(source)
    cluster = read_instance(cluster_file)
    jobs, classes = with_gavel_speeds(
        read_trace(trace_file), table, seed, cluster.gpu_types, _assumptions(assumptions_file)
    )
    kept = len(jobs) - len(classes)  # durations by type only: kept as the trace gives them
    click.echo(
        f"jobs {len(jobs)}  classes {len(set(classes.values()))}  types {len(cluster.gpu_types)}"
        + (f"  kept as given {kept}" if kept else "")
    )
    inputs = [trace_file, cluster_file, source, assumptions_file]
    _write_outputs(None, None, jobs, trace_out, inputs)
