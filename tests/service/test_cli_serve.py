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


def test_a_db_in_a_missing_folder_names_the_path(tmp_path: Path) -> None:
    """Before: `unable to open database file`, without the path."""
    db = tmp_path / "nodir" / "a.db"
    result = CliRunner().invoke(main, ["serve", "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: --db {db}: cannot open the database: folder {db.parent} does not exist"
    )


def test_a_db_that_is_a_folder_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--db", str(tmp_path)])
    assert result.exit_code == 2
    assert f"--db {tmp_path}: cannot open the database: is a folder" in result.output


def test_a_db_url_without_its_driver_hides_the_password() -> None:
    url = "postgresql+nosuchdriver://user:secret@127.0.0.1:1/x"
    result = CliRunner().invoke(main, ["serve", "--db", url])
    assert result.exit_code == 2 and result.output.startswith("error: --db ")
    assert "secret" not in result.output and "Traceback" not in result.output
