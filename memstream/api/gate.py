"""What every request passes before a route reads it: its API key, then its body's size.

FastAPI reads and parses a body before the route (and its tenant check) runs, so without this
one large body from anyone who can reach the port costs the process its size several times
over. Here an unknown key is refused (401) before any of the body is read, and a body over
``MEMSTREAM_API_MAX_BODY_BYTES`` is refused (413): at once when its announced length is over,
else as soon as the bytes received are, whatever its headers say (a ``Transfer-Encoding`` is
case-insensitive, and no check of a header's spelling can be trusted to match the server's).
The route still decides whether the key may touch the request's tenant (403).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream.api.auth import authenticate
from memstream.api.errors import error_body
from memstream.errors import ApiError

_PROTECTED = "/v1/"


class Gate:
    """Pure ASGI middleware: no per-request objects beyond what a refusal needs."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, keys: dict[str, str]) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope["headers"])
        if self.keys and scope["path"].startswith(_PROTECTED):
            try:
                authenticate(self.keys, headers.get(b"authorization", b"").decode("latin-1"))
            except ApiError as exc:
                await _refuse(send, exc.status, exc.code, exc.message)
                return
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await _refuse(send, 400, "bad_request", "Content-Length is not a number")
                return
            if int(length) > self.max_body_bytes:
                await _refuse(send, 413, "payload_too_large", self._too_large())
                return
        # Whatever the headers announce (a Transfer-Encoding in any spelling, a length or
        # none), what arrives is counted: the limit holds even where a header is misread.
        body = _Counted(receive, send, self.max_body_bytes, self._too_large())
        try:
            await self.app(scope, body.receive, body.send)
        except _TooLarge:
            if not body.refused:
                raise

    def _too_large(self) -> str:
        return f"request bodies are limited to {self.max_body_bytes} bytes"


class _TooLarge(Exception):
    """Raised to the app reading a body past the limit, once the 413 is sent."""


class _Counted:
    """One request's ``receive`` and ``send``: counts the body's bytes, answers 413 once they
    are over the limit and drops what the app sends after that."""

    __slots__ = ("_receive", "_send", "limit", "message", "received", "refused", "started")

    def __init__(self, receive: Receive, send: Send, limit: int, message: str) -> None:
        self._receive = receive
        self._send = send
        self.limit = limit
        self.message = message
        self.received = 0
        self.started = False
        self.refused = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                if not self.started:
                    self.started = self.refused = True
                    await _refuse(self._send, 413, "payload_too_large", self.message)
                raise _TooLarge(self.message)
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = orjson.dumps(error_body(code, message))
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The unread rest of the body would otherwise be taken for the next request.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
