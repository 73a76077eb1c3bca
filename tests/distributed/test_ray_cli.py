"""`whale-opt solve --executor ray` when the Ray cluster does not answer (no Ray
instance of this process may be running: it would be joined instead)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray")


def test_cli_exits_2_when_the_ray_cluster_does_not_answer() -> None:
    from click.testing import CliRunner

    from whale_opt.cli import main

    small = str(Path(__file__).resolve().parents[2] / "instances/small/two-racks-mixed.json")
    args = ["solve", small, "--executor", "ray", "--ray-address", "127.0.0.1:1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "cannot reach the Ray cluster" in result.output
