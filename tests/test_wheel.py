"""A plain (non-editable) install stands on its own.

The wheel is built from a copy of the sources (so the build leaves nothing in
the working tree) and installed, alone, into a fresh virtual environment;
the third-party dependencies come from the development environment, behind
the new one's own site-packages, so the test needs no download of them. The
CLI then runs from a directory outside the repository: whatever the round
reads (CP-SAT presets, JSON Schemas) must come from the installed package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INSTANCE = REPO / "instances" / "small" / "two-racks-mixed.json"
SOURCES = ("pyproject.toml", "README.md", "whale_opt")  # what the build reads
STEP_TIMEOUT_S = 120


def _run(args: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in ``cwd`` with no path settings inherited from this process."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    env["PYTHONNOUSERSITE"] = "1"
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )


def _ok(args: list[str | Path], cwd: Path) -> str:
    """Run ``args``; fail the test with its output if it fails."""
    done = _run(args, cwd)
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with whale_opt installed from a freshly built wheel."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    dist = root / "dist"
    _ok([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source], root)
    (wheel,) = dist.glob("whale_opt-*.whl")
    env_dir = root / "venv"
    _ok([sys.executable, "-m", "venv", "--without-pip", env_dir], root)
    python = env_dir / "bin" / "python"
    install = ["install", "--no-deps", "--no-index", "-q", wheel]
    _ok([sys.executable, "-m", "pip", "--python", python, *install], root)
    # Only now (pip must not see the development install of whale_opt) the
    # dependencies: a path entry after the environment's own site-packages.
    query = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(_ok([python, "-c", query], root).strip())
    (site / "_dev_dependencies.pth").write_text(f"{sysconfig.get_path('purelib')}\n", "utf-8")
    return env_dir


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the repository, holding a copy of the instance."""
    shutil.copy2(INSTANCE, tmp_path / INSTANCE.name)
    return tmp_path


def test_whale_opt_comes_from_the_wheel_not_the_repository(venv: Path, outside: Path) -> None:
    code = "import whale_opt.cpsat.presets as p, whale_opt; print(whale_opt.__file__)"
    where = Path(_ok([venv / "bin" / "python", "-c", code], outside).strip()).resolve()
    assert where.is_relative_to(venv.resolve())
    assert not where.is_relative_to(REPO)


def test_installed_cli_solves_with_a_packaged_preset(venv: Path, outside: Path) -> None:
    command = [venv / "bin" / "whale-opt", "solve", "--solver", "cpsat", "--preset", "fast"]
    stdout = _ok([*command, "--time-limit", "1", INSTANCE.name, "--json"], outside)
    decision = json.loads(stdout)
    assert decision["format"] == "whale-opt/decision@1"
    assert decision["solver"] == "cpsat"
    assert len(decision["jobs"]) > 0
    assert "greedy_value" in decision["stats"]


def test_installed_cli_rejects_an_unknown_preset_in_one_line(venv: Path, outside: Path) -> None:
    command = [venv / "bin" / "whale-opt", "solve", "--solver", "cpsat", "--preset", "nosuch"]
    done = _run([*command, INSTANCE.name], outside)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'nosuch'" in lines[0]
    assert "default, deterministic, fast" in lines[0]
