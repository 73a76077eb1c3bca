"""Run Slurm commands with a bound on every wait.

A Slurm client whose controller is down retries for a long time (once, an
unbounded poll hung for 15 minutes); every call here has a timeout, and a
controller that cannot be reached raises :class:`SlurmUnavailable`, which
the controller loop turns into a back-off and a retry.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("whale_opt")

DEFAULT_TIMEOUT_S = 10.0
# What Slurm clients print when the controller is unreachable (not a job's fault).
UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Could not establish a configuration source",
    "Zero Bytes were transmitted or received",
)


class SlurmUnavailable(RuntimeError):
    """The Slurm controller (or its commands) cannot be reached now."""


@dataclass(frozen=True)
class CommandResult:
    """How one command ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        """Exit status 0."""
        return self.returncode == 0

    @property
    def message(self) -> str:
        """The last line of stderr (or stdout), for a log line."""
        text = (self.stderr or self.stdout).strip()
        return text.splitlines()[-1] if text else f"exit status {self.returncode}"


class SlurmRunner:
    """Runs ``squeue``, ``sinfo`` and ``scontrol`` with a timeout each.

    ``env`` replaces the environment of the commands (e.g. to set
    ``SLURM_CONF``); None inherits ours.
    """

    def __init__(
        self, timeout_s: float = DEFAULT_TIMEOUT_S, env: Mapping[str, str] | None = None
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.env = dict(env) if env is not None else None

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run ``argv``; raise :class:`SlurmUnavailable` on a timeout, a missing
        program or a controller that cannot be reached."""
        command = " ".join(argv)
        started = time.monotonic()
        try:
            # A session of its own, so a timeout kills the command and any child it has.
            process = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SlurmUnavailable(f"'{argv[0]}' is not installed (not on PATH)") from exc
        try:
            stdout, stderr = process.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise SlurmUnavailable(f"'{command}' timed out after {self.timeout_s:g} s") from exc
        result = CommandResult(
            tuple(argv), process.returncode, stdout, stderr, time.monotonic() - started
        )
        if not result.ok and any(text in result.stderr for text in UNREACHABLE):
            raise SlurmUnavailable(f"'{command}': {result.message}")
        log.debug("slurm: %s -> %s (%.2f s)", command, result.returncode, result.seconds)
        return result

    def read_json(self, argv: Sequence[str]) -> dict[str, Any]:
        """Run a ``--json`` command and parse its output."""
        result = self.run(argv)
        if not result.ok:
            raise SlurmUnavailable(f"'{' '.join(argv)}' failed: {result.message}")
        try:
            document = json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmUnavailable(f"'{' '.join(argv)}' printed no JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise SlurmUnavailable(f"'{' '.join(argv)}' printed JSON that is not an object")
        return document
