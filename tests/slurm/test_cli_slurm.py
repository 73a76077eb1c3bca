"""``whale-opt slurm`` end to end, against fake squeue/sinfo/scontrol programs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from whale_opt.cli import main

from .conftest import DATA


def fake_slurm(bin_dir: Path, layout: str) -> Path:
    """squeue/sinfo that print a recording, and a scontrol that logs its arguments."""
    bin_dir.mkdir()
    log = bin_dir / "scontrol.log"
    scripts = {
        "squeue": f"cat {DATA / f'{layout}.squeue.json'}",
        "sinfo": f"cat {DATA / f'{layout}.sinfo.json'}",
        "scontrol": f'echo "$*" >> {log}',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return log


def whale_opt_slurm(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI with the fake Slurm first on PATH."""
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-c", "from whale_opt.cli import main; main()", "slurm", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_once_places_held_jobs(tmp_path: Path) -> None:
    log = fake_slurm(tmp_path / "bin", "indexed")
    done = whale_opt_slurm(tmp_path / "bin", "--once", "--gres-mode", "indexed", "--solver", "wspt")
    assert done.returncode == 0, done.stderr
    commands = log.read_text().splitlines()
    assert commands and commands[-1].startswith("release ")
    assert any(line.startswith("update JobId=") and "NodeList=n1" in line for line in commands)
    assert "stays held: waits on its dependency" in done.stderr
    assert "slurm: round:" in done.stderr


def test_dry_run_only_logs(tmp_path: Path) -> None:
    log = fake_slurm(tmp_path / "bin", "plain")
    done = whale_opt_slurm(tmp_path / "bin", "--once", "--dry-run", "--solver", "wspt")
    assert done.returncode == 0, done.stderr
    assert not log.exists()


def test_unreachable_slurm_exits_1(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text("#!/bin/sh\nsleep 30\n")  # sleep outlives sh: killed with its group
    squeue.chmod(0o755)
    done = whale_opt_slurm(bin_dir, "--once", "--command-timeout", "0.5")
    assert done.returncode == 1
    assert "controller unreachable: 'squeue --json' timed out after 0.5 s" in done.stderr


def test_bad_gpu_type_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["slurm", "--once", "--gpu-type", "a100"])
    assert result.exit_code == 2
    assert "NAME=MEMORY_GB" in result.output


def test_a_bad_gpu_second_price_is_a_usage_error() -> None:
    for bad in ("a100", "a100=cheap", "a100=-1"):
        result = CliRunner().invoke(main, ["slurm", "--once", "--gpu-second-price", bad])
        assert result.exit_code == 2, bad
        assert "--gpu-second-price" in result.output


def test_prices_reach_the_rounds_and_a_type_the_partition_lacks_is_left_out(tmp_path: Path) -> None:
    log = fake_slurm(tmp_path / "bin", "indexed")
    done = whale_opt_slurm(
        tmp_path / "bin",
        "--once",
        "--gres-mode",
        "indexed",
        "--solver",
        "wspt",
        "--gpu-second-price",
        "a100=0.5",
        "--gpu-second-price",
        "h100=2",
    )
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("release ") for line in log.read_text().splitlines())
