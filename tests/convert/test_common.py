"""Row problems every converter shares: malformed CSV, repeated ids, oversized nodes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from whale_opt.convert import (
    read_openb_cluster,
    read_openb_trace,
    read_pai_cluster,
    read_philly_cluster,
    read_philly_trace,
)
from whale_opt.io import InputError, read_instance, schema, write_instance

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
OPENB_NODES = "sn,cpu_milli,memory_mib,gpu,model\n"
PHILLY_MACHINES = "machineId, number of GPUs, single GPU mem\n"
OPENB_PODS = (TRACES / "openb_pods.csv").read_text().splitlines(keepends=True)[0]
UNQUOTED_NEWLINE = "new-line character seen in unquoted field"
NODE_LIMIT = schema("instance")["properties"]["nodes"]["items"]["properties"]["gpus"]["maximum"]
# (reader, file text whose line 2 has a node of {gpus} GPUs, the GPU column)
NODE_LISTS: list[tuple[Callable[[Path], Any], str, str]] = [
    (read_pai_cluster, "m0,P100,96,512,2\nm1,P100,96,512,{gpus}\n", "cap_gpu"),
    (read_philly_cluster, PHILLY_MACHINES + "m1,{gpus}, 12GB\n", "number of GPUs"),
    (read_openb_cluster, OPENB_NODES + "n1,96000,393216,{gpus},G2\n", "gpu"),
]


def error_of(read: Callable[[Path], Any], path: Path, text: str) -> str:
    path.write_text(text, "utf-8")
    with pytest.raises(InputError) as caught:
        read(path)
    return str(caught.value)


@pytest.mark.parametrize(
    ("read", "text"),
    [
        (read_pai_cluster, "m0,P100,96,512,2\nm1,P1\r00,96,512,2\n"),
        (read_philly_cluster, PHILLY_MACHINES + "m1,2, 12\rGB\n"),
        (read_openb_cluster, OPENB_NODES + "n1,96000,393216,8,G\r2\n"),
        (read_openb_trace, OPENB_PODS + "p1,1000,1024,1,1000,,LS,Run\rning,0,10,0\n"),
    ],
)
def test_bare_carriage_return_names_file_and_line(
    tmp_path: Path, read: Callable[[Path], Any], text: str
) -> None:
    path = tmp_path / "in.csv"
    message = error_of(read, path, text)
    assert message == f"{path}: line 2: is not valid CSV: {UNQUOTED_NEWLINE}"


def test_bare_carriage_return_in_the_header(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    message = error_of(read_philly_cluster, path, "machineId,\rGPUs\nm0,2,12GB\n")
    assert message == f"{path}: line 1: is not valid CSV: {UNQUOTED_NEWLINE}"


@pytest.mark.parametrize(
    ("read", "text", "where"),
    [
        (
            read_pai_cluster,
            "m1,P100,96,512,2\nm2,T4,96,512,0\nm1,P100,96,512,2\n",
            "line 3: machine: duplicate machine id 'm1' (first at line 1)",
        ),
        (
            read_philly_cluster,
            PHILLY_MACHINES + "m1,2, 12GB\nm2,8, 24GB\nm1,2, 12GB\n",
            "line 4: machineId: duplicate machine id 'm1' (first at line 2)",
        ),
        (
            read_openb_cluster,
            OPENB_NODES + "n1,1,1,8,G2\nn2,1,1,8,G2\nn1,1,1,2,G2\n",
            "line 4: sn: duplicate node id 'n1' (first at line 2)",
        ),
    ],
)
def test_duplicate_node_id_names_both_lines(
    tmp_path: Path, read: Callable[[Path], Any], text: str, where: str
) -> None:
    path = tmp_path / "nodes.csv"
    assert error_of(read, path, text) == f"{path}: {where}"


def test_node_gpu_limit_comes_from_the_schema() -> None:
    from whale_opt.convert._common import MAX_NODE_GPUS

    assert MAX_NODE_GPUS == NODE_LIMIT == 64


@pytest.mark.parametrize("gpus", [NODE_LIMIT + 1, 100, "12345678901234567890123"])
@pytest.mark.parametrize(("read", "text", "column"), NODE_LISTS)
def test_node_of_more_gpus_than_instance_allows_is_refused(
    tmp_path: Path, read: Callable[[Path], Any], text: str, column: str, gpus: object
) -> None:
    path = tmp_path / "nodes.csv"
    message = error_of(read, path, text.format(gpus=gpus))
    assert message == (
        f"{path}: line 2: {column}: must be at most {NODE_LIMIT} GPUs "
        f"(an instance@1 node's limit) (got '{gpus}')"
    )


@pytest.mark.parametrize(("read", "text", "column"), NODE_LISTS)
def test_node_of_the_most_gpus_is_kept(
    tmp_path: Path, read: Callable[[Path], Any], text: str, column: str
) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(text.format(gpus=NODE_LIMIT))
    cluster, _ = read(path)
    write_instance(tmp_path / "cluster.json", cluster)
    again = read_instance(tmp_path / "cluster.json")
    assert max(node.gpu_count for node in again.nodes) == NODE_LIMIT


def test_philly_duplicate_job_id_names_both_positions(tmp_path: Path) -> None:
    jobs = json.loads((TRACES / "philly_jobs.json").read_text())[:2]
    path = tmp_path / "jobs.json"
    message = error_of(read_philly_trace, path, json.dumps([jobs[0], jobs[1], jobs[0]]))
    assert message == f"{path}: [2].id: duplicate job id {jobs[0]['id']!r} (first at [0])"
