"""``whale-opt train`` through click's CliRunner: a tiny run, and bad input -> exit 2."""

from __future__ import annotations

import pytest

pytest.importorskip("sb3_contrib")

from click.testing import CliRunner

from whale_opt.cli import main


def test_a_tiny_run_writes_model_checkpoints_and_curve(tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    args = ["train", "--cluster", "a100-4x8", "--trace-seeds", "1", "--jobs", "8"]
    args += ["--timesteps", "64", "--checkpoint-every", "64", "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    for name in ("model.zip", "model.json", "curve.csv", "curve.png", "train.json"):
        assert (out / name).is_file(), name
    assert list((out / "checkpoints").glob("step-*.zip"))
    assert "steps/s" in result.output
    # the trained model is what `simulate --policy learned` runs
    monkeypatch.setenv("WHALE_OPT_LEARNED", str(out / "model.zip"))
    from whale_opt.registry import get_policy

    assert get_policy("learned").checkpoint == out / "model.zip"


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--cluster", "no-such-cluster"], ["--cluster", "no-such-cluster"]),
        (["--trace-seeds", "five"], ["--trace-seeds", "five"]),
        (["--timesteps", "0"], ["--timesteps", "0"]),
        (["--jobs", "-3"], ["--jobs", "-3"]),
        (["--slots", "0"], ["--slots", "0"]),
    ],
)
def test_bad_input_names_the_option_and_exits_2(tmp_path, args, names) -> None:
    result = CliRunner().invoke(main, ["train", *args, "-o", str(tmp_path / "never")])
    assert result.exit_code == 2
    assert all(name in result.output for name in names), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "never").exists()
