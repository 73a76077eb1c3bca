"""The records a caller builds in Python: lists and mappings where the types say
tuples, and values of the wrong kind, refused by name on construction, never
a TypeError from deep inside a solver."""

from __future__ import annotations

from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.problem_data import FieldError, GpuType, Instance, Node, QueuedJob, RunningJob
from whale_opt.solve import solve

TYPES = {"A100": GpuType("A100", 80)}


def test_lists_and_a_mapping_make_the_same_round_as_tuples() -> None:
    # Before, a list of failed GPUs or of NVLink edges, or a list of nodes, passed
    # the records' checks and then failed with "unhashable type: 'list'" in the
    # topology; a mapping of durations by type failed to unpack.
    as_lists = Instance(
        "x",
        TYPES,
        [Node("n1", "A100", 4, [[0, 1], [2, 3]], failed_gpus=[3])],  # type: ignore[arg-type]
        running=[RunningJob("r", ["n1/0"], 100)],  # type: ignore[arg-type]
        queue=[QueuedJob("q", 2, duration_by_type_s={"A100": 50}, gpu_types=["A100"])],  # type: ignore[arg-type]
    )
    as_tuples = Instance(
        "x",
        TYPES,
        (Node("n1", "A100", 4, ((0, 1), (2, 3)), failed_gpus=(3,)),),
        running=(RunningJob("r", ("n1/0",), 100),),
        queue=(QueuedJob("q", 2, duration_by_type_s=(("A100", 50),), gpu_types=("A100",)),),
    )
    assert as_lists == as_tuples
    decision = solve(as_lists, "cpsat", time_limit_s=1.0)
    assert check(as_lists, decision) == []
    assert decision.objective == solve(as_tuples, "cpsat", time_limit_s=1.0).objective


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: QueuedJob("q", 1, 10, submitted_at="0"), r"submitted_at: must be an integer"),
        (lambda: QueuedJob("q", 1, 10, submitted_at=None), r"submitted_at: must be an integer"),
        (lambda: QueuedJob("q", 1, 10, gpu_types="A100"), r"gpu_types: must be a list"),
        (
            lambda: QueuedJob("q", 1, duration_by_type_s=[("A100", 5, 6)]),
            r"duration_by_type_s: must map GPU types to seconds",
        ),
        (lambda: RunningJob("r", ("n1/0",), 100, started_at=1.5), r"started_at: must be an int"),
        (lambda: RunningJob("r", "n1/0", 100), r"gpus: must be a list"),
        (lambda: Node("n", "A100", 4, [[0, 1, 2]]), r"nvlink.edges\[0\]: must link two"),
        (lambda: Node("n", "A100", 4, failed_gpus=3), r"failed_gpus: must be a list"),
        (lambda: Instance("x", TYPES, None), r"nodes: must be a list"),  # type: ignore[arg-type]
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_by_name(build: Any, message: str) -> None:
    with pytest.raises(FieldError, match=message):
        build()
