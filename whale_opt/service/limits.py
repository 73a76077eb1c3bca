"""Request bodies: a plain ASGI middleware that answers 413 past the size limit,
and 422 for JSON the files would refuse.

The body is read (up to the limit) before the application sees it, so a
client that lies in ``Content-Length`` or streams without one is cut off at
the limit as well. A body is then held to the strict JSON of files
(:func:`whale_opt.io.parse_json`): a key given twice, an integer beyond 64
bits, ``NaN`` or ``1e999``, nesting past 64 levels are refused with their
JSON path, as in a file (the web framework's reader would take the last of
two keys and pass the others to the solvers). A body that is not JSON at all
goes on to the framework, which answers 400.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi.responses import JSONResponse

from whale_opt.io import InputError, parse_json
from whale_opt.service.errors import from_input_error

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refused = _refused(body)
        if refused is not None:
            await refused(scope, receive, send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps(
            {"detail": f"request body larger than {self.max_bytes} bytes"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _refused(body: bytes) -> JSONResponse | None:
    """The 422 for a JSON body the files' reader refuses; None to go on."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.strip():
        return None
    try:
        parse_json("request body", text)
    except InputError as exc:
        if isinstance(exc.__cause__, json.JSONDecodeError):
            return None  # not JSON at all: the framework's 400
        return from_input_error(exc).response()
    return None
