"""``whale-opt pack`` end to end on the tiny excerpt, and its exit 2 on bad input."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

from whale_opt.cli import main

from .builders import OPENB, PACK_DATA


def _pack(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["pack", "--data", str(PACK_DATA), *args])
    return result.exit_code, result.output


def test_pack_writes_curves_table_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = _pack(
        "--trace", "tiny", "--policy", "BestFit", "--policy", "fgd", "--seeds", "2", "-o", str(out)
    )
    assert code == 0, output
    assert "| trace | BestFit | FGD |" in output
    assert "| tiny |" in output
    for name in ("curves.csv", "seeds.csv", "table.md", "packing-tiny.png"):
        assert (out / name).is_file(), name
    with (out / "curves.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["policy"] for r in rows} == {"BestFit", "FGD"}
    assert len(rows) == 2 * 131  # arrived 0..130 for each policy
    with (out / "seeds.csv").open() as handle:
        assert {r["seed"] for r in csv.DictReader(handle)} == {"42", "43"}
    assert (out / "packing-tiny.png").read_bytes().startswith(b"\x89PNG")


def test_an_unknown_trace_exits_2_naming_it(tmp_path: Path) -> None:
    code, output = _pack("--trace", "gpushare33", "-o", str(tmp_path))
    assert code == 2
    assert "unknown trace 'gpushare33'" in output and "tiny" in output


def test_an_unknown_policy_exits_2_naming_it(tmp_path: Path) -> None:
    code, output = _pack("--trace", "tiny", "--policy", "Tetris", "-o", str(tmp_path))
    assert code == 2
    assert "Tetris" in output


def test_a_missing_node_list_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nodes.csv"
    code, output = _pack("--trace", "tiny", "--nodes", str(missing), "-o", str(tmp_path))
    assert code == 2
    assert str(missing) in output and "no such file" in output


def test_a_bad_pod_list_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    code, output = _pack(
        "--trace", "bad", "--policy", "Random", "--seeds", "1", "-o", str(tmp_path)
    )
    assert code == 2
    assert "openb_pod_list_bad.csv" in output and "line 5: gpu_milli" in output
    assert str(OPENB) in output


def test_pack_runs_frag_aware_and_cpsat_rounds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = _pack(
        "--trace", "tiny", "--policy", "cpsat-b16", "--policy", "FGD", "--policy", "frag-aware",
        "--seeds", "1", "-o", str(out),
    )  # fmt: skip
    assert code == 0, output
    assert "| trace | FGD | frag-aware | cpsat-b16 |" in output  # the study's order
    with (out / "curves.csv").open() as handle:
        assert len({r["policy"] for r in csv.DictReader(handle)}) == 3


def test_policy_groups_name_ours_and_the_published_six() -> None:
    from whale_opt.cli.pack import _policies

    assert _policies(()) == ["Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD"]
    ours = ["frag-aware", "cpsat-b1", "cpsat-b16", "cpsat-b64", "cpsat-b256"]
    assert _policies(("ours", "FGD")) == ["FGD", *ours]
    assert len(_policies(("all",))) == 11


def test_an_unknown_batch_size_exits_2_naming_option_and_value(tmp_path: Path) -> None:
    code, output = _pack("--trace", "tiny", "--policy", "cpsat-b32", "-o", str(tmp_path))
    assert code == 2
    assert "--policy" in output and "cpsat-b32" in output
