"""``whale-opt serve``: its options, and bad settings refused before it binds."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from whale_opt.cli import main


def test_serve_lists_its_options() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--db", "--tokens", "--workers", "--max-time-limit"):
        assert option in result.output
    assert "127.0.0.1" in result.output


def test_a_bad_tokens_file_exits_2(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("superuser some-long-secret-token\n")
    result = CliRunner().invoke(
        main, ["serve", "--tokens", str(tokens), "--db", str(tmp_path / "s.db")]
    )
    assert result.exit_code == 2
    assert "unknown role 'superuser'" in result.output


def test_the_tokens_file_may_come_from_the_environment(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--db", str(tmp_path / "s.db")],
        env={"WHALE_OPT_TOKENS": str(tmp_path / "missing")},
    )
    assert result.exit_code == 2 and "missing" in result.output
