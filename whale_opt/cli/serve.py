"""``whale-opt serve``: the HTTP service (extra ``[service]``: FastAPI, uvicorn, SQLAlchemy)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from whale_opt.cli.app import EXIT_BAD_INPUT, main

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@main.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--db",
    default="whale-opt.db",
    show_default=True,
    help="SQLite file, or any SQLAlchemy URL (postgresql+psycopg://...).",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Bearer tokens file, one 'ROLE TOKEN [NAME]' a line (env WHALE_OPT_TOKENS).",
)
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 256))
@click.option(
    "--queue",
    default=64,
    show_default=True,
    type=click.IntRange(0, 100_000),
    help="Solves that may wait for a worker before requests get 503.",
)
@click.option(
    "--max-time-limit",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Cap on any round's time limit, seconds.",
)
@click.option("--max-body-mb", default=16.0, show_default=True, type=click.FloatRange(min=0.001))
@click.option(
    "--pool",
    default="process",
    show_default=True,
    type=click.Choice(["process", "thread"]),
    help="Solve in worker processes (parallel) or threads.",
)
@click.option(
    "--open-extender",
    is_flag=True,
    help="Kubernetes extender routes need no token (kube-scheduler cannot send one).",
)
@click.option("--log-level", default="info", show_default=True)
def serve_command(
    host: str,
    port: int,
    db: str,
    tokens_file: Path | None,
    workers: int,
    queue: int,
    max_time_limit: float,
    max_body_mb: float,
    pool: str,
    open_extender: bool,
    log_level: str,
) -> None:
    """Serve the round API over HTTP (OpenAPI at /openapi.json)."""
    try:
        import uvicorn
        from sqlalchemy.exc import SQLAlchemyError

        from whale_opt.service import ServiceConfig, create_app
    except ImportError as exc:
        click.echo(f"error: {exc.name} is missing: pip install 'whale-opt[service]'", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if tokens_file is None and os.environ.get("WHALE_OPT_TOKENS"):
        tokens_file = Path(os.environ["WHALE_OPT_TOKENS"])
    if tokens_file is None and host not in LOCAL_HOSTS:
        click.echo(
            f"warning: no --tokens: anyone who reaches {host}:{port} may change the clusters",
            err=True,
        )
    try:
        config = ServiceConfig(
            db=db,
            tokens_file=tokens_file,
            workers=workers,
            queue=queue,
            max_time_limit_s=max_time_limit,
            max_body_bytes=int(max_body_mb * (1 << 20)),
            pool=pool,
            open_extender=open_extender,
        )
        app = create_app(config)
    except SQLAlchemyError as exc:
        click.echo(f"error: --db {_shown(db)}: {_db_problem(db, exc)}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except ImportError as exc:  # the URL's database driver (psycopg, say)
        click.echo(
            f"error: --db {_shown(db)}: its database driver is missing: {exc.name or exc}",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    except (OSError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), timeout_graceful_shutdown=5)


def _shown(db: str) -> str:
    """``--db`` as an error may show it: a URL's password hidden."""
    if "://" not in db:
        return db
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def _db_problem(db: str, exc: Exception) -> str:
    """Why the database cannot be opened, in one line (without SQLAlchemy's
    statement and background link)."""
    if "://" not in db:
        if Path(db).expanduser().is_dir():
            return "cannot open the database: is a folder, not a database file"
        folder = Path(db).expanduser().resolve().parent
        if not folder.is_dir():
            return f"cannot open the database: folder {folder} does not exist"
    reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
    return f"cannot open the database: {reason}"
