"""Every Slurm command is bounded; an unreachable controller is one exception."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from whale_opt.slurm import SlurmRunner, SlurmUnavailable


def test_a_hanging_command_times_out() -> None:
    runner = SlurmRunner(timeout_s=0.3)
    began = time.monotonic()
    with pytest.raises(SlurmUnavailable, match=r"'sleep 5' timed out after 0.3 s"):
        runner.run(["sleep", "5"])
    assert time.monotonic() - began < 3


def test_a_missing_program() -> None:
    with pytest.raises(SlurmUnavailable, match="not installed"):
        SlurmRunner().run(["whale-opt-no-such-squeue"])


def test_an_unreachable_controller() -> None:
    script = "echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2"
    with pytest.raises(SlurmUnavailable, match="Unable to contact slurm controller"):
        SlurmRunner().run(["sh", "-c", f"{script}; exit 1"])


def test_a_refused_command_is_a_result() -> None:
    result = SlurmRunner().run(["sh", "-c", "echo 'Invalid job id specified' >&2; exit 1"])
    assert not result.ok and result.message == "Invalid job id specified"


def test_read_json() -> None:
    runner = SlurmRunner(env={"PATH": "/usr/bin:/bin", "X": "7"})
    assert runner.read_json(["sh", "-c", 'echo "{\\"x\\": $X}"']) == {"x": 7}
    with pytest.raises(SlurmUnavailable, match="no JSON"):
        runner.read_json(["echo", "not json"])
    with pytest.raises(SlurmUnavailable, match="failed"):
        runner.read_json(["false"])


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        SlurmRunner(timeout_s=0)


def test_a_timeout_kills_the_children_too(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    runner = SlurmRunner(timeout_s=0.3)
    with pytest.raises(SlurmUnavailable):
        runner.run(["sh", "-c", f"(sleep 1; touch {marker}) & wait"])
    time.sleep(1.5)
    assert not marker.exists()
