"""The benchmark report runs end to end on the test excerpts (``bench/report.py --quick``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_report_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = (tmp_path / "RESULTS.md").read_text()
    # Both real traces (excerpts), at their own load and compressed to 80%, a family, scaling.
    for section in (
        "## openb-own",
        "## openb-load80",
        "## philly-own",
        "## philly-load80",
        "## hetero-load80",
        "## Solver scaling",
    ):
        assert section in text
    assert "Targets on openb-load80" in text
    # Every policy of the quick run has a row in every study table.
    for policy in ("fifo", "best-fit", "wspt", "cpsat"):
        assert text.count(f"| {policy} |") == 5
    # The compressed trace really runs at the asked load.
    assert "offered load 80.0% (arrivals compressed to 80%)" in text
    pngs = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png"))
    assert "plots/scaling.png" in pngs
    assert "plots/openb-load80/jct_cdf.png" in pngs
    for png in pngs:
        assert f"({png})" in text  # every plot is linked from the report


def test_quick_fairness_report_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fairness.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [
        line.split(" | ")
        for line in (tmp_path / "FAIRNESS.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| policy")
    ]
    assert [row[0] for row in rows] == [
        "| fifo",
        "| sjf",
        "| wspt",
        "| best-fit",
        "| frag-aware",
        "| las",
        "| hybrid",
        "| cpsat",
        "| wspt (no preemption)",
    ]
    for row in rows:
        assert row[1] == "0"  # no job lost, under failures and preemption
        completed, submitted = row[2].split("/")
        assert completed == submitted
    assert rows[-1][7] == "0"  # no preemptions when preemption is off
