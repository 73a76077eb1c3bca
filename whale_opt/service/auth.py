"""Bearer tokens and roles: ``read`` < ``submit`` < ``admin``.

With no tokens file every route is open (and the server binds 127.0.0.1 by
default). With one, every route needs ``Authorization: Bearer TOKEN``: no or
an unknown token is 401, a role below the route's is 403.

The tokens file has one token a line, ``ROLE TOKEN [NAME]``; ``#`` starts a
comment. A token may be given as ``sha256:HEX`` (the hex SHA-256 of the
token) so the file need not hold the secret itself::

    # role   token                                    name
    admin    0b7c...e1                                ops
    submit   sha256:5e884898da28047151d0e56f8dc629... ci
    read     r-7f3a...                                grafana

What each role may do: ``read`` looks (state, jobs, pre-warming hints,
schemas, metrics, health, the checker and the Kubernetes extender's filter
and prioritize); ``submit`` also computes and reports on jobs (solve,
explain, what-if, propose; submit, finish, checkpointed); ``admin`` also
changes the cluster (create and delete clusters, nodes down and draining,
decide, apply).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from whale_opt.service.errors import ApiError


class Role(enum.IntEnum):
    """What a caller may do; a higher role includes the lower ones."""

    READ = 1
    SUBMIT = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """The role's name as written in the tokens file."""
        return self.name.lower()


@dataclass(frozen=True)
class Principal:
    """Who called: the token's name (idempotency keys are per principal) and role."""

    name: str
    role: Role


ANONYMOUS = Principal("-", Role.ADMIN)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_tokens(text: str, source: str = "<tokens>") -> dict[str, Principal]:
    """SHA-256 of each token -> its principal; ValueError names the bad line."""
    found: dict[str, Principal] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) not in (2, 3):
            raise ValueError(f"{source}:{number}: expected ROLE TOKEN [NAME]")
        role_name, token = words[0], words[1]
        try:
            role = Role[role_name.upper()]
        except KeyError:
            raise ValueError(
                f"{source}:{number}: unknown role {role_name!r} (read, submit, admin)"
            ) from None
        if token.startswith("sha256:"):
            digest = token.removeprefix("sha256:").lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"{source}:{number}: sha256: needs 64 hex digits")
        elif len(token) < 16:
            raise ValueError(f"{source}:{number}: token shorter than 16 characters")
        else:
            digest = _digest(token)
        if digest in found:
            raise ValueError(f"{source}:{number}: token given twice")
        name = words[2] if len(words) == 3 else f"{role.label}-{number}"
        found[digest] = Principal(name, role)
    if not found:
        raise ValueError(f"{source}: no token (an empty file would leave the service open)")
    return found


def read_tokens(path: Path) -> dict[str, Principal]:
    """The tokens of file ``path`` (see the module docstring)."""
    return parse_tokens(Path(path).read_text("utf-8"), str(path))


EXTENDER_PREFIX = "/extender/"
EXTENDER = Principal("kube-scheduler", Role.READ)


class Authorizer:
    """Checks a request's bearer token against the tokens (None: no auth).

    ``open_extender``: the Kubernetes extender's routes (read-only) are
    answered without a token, as kube-scheduler cannot send one.
    """

    def __init__(self, tokens: dict[str, Principal] | None, open_extender: bool = False) -> None:
        self.tokens = tokens
        self.open_extender = open_extender

    @property
    def enabled(self) -> bool:
        """Whether tokens are required."""
        return self.tokens is not None

    def principal(self, authorization: str | None, needed: Role) -> Principal:
        """Who calls with header ``authorization``; 401 or 403 unless allowed."""
        if self.tokens is None:
            return ANONYMOUS
        challenge = {"WWW-Authenticate": 'Bearer realm="whale-opt"'}
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "a bearer token is required", headers=challenge)
        digest = _digest(token.strip())
        match = next((p for d, p in self.tokens.items() if hmac.compare_digest(d, digest)), None)
        if match is None:
            raise ApiError(401, "unknown token", headers=challenge)
        if match.role < needed:
            raise ApiError(403, f"role {match.role.label} may not do this (needs {needed.label})")
        return match


def require(role: Role) -> Callable[[Request], Awaitable[Principal]]:
    """A route dependency: the caller's principal, if it holds ``role``."""

    async def dependency(request: Request) -> Principal:
        authorizer: Authorizer = request.app.state.service.auth
        open_route = authorizer.open_extender and request.url.path.startswith(EXTENDER_PREFIX)
        if open_route and role <= Role.READ and authorizer.enabled:
            principal = EXTENDER
        else:
            principal = authorizer.principal(request.headers.get("authorization"), role)
        request.state.principal = principal
        return principal

    return dependency
