"""What every request passes before a route reads it: its host (421), its API key (401, before
any of the body is read), then its body's size (413, counted as it arrives); and the headers
every answer gets. Why: docs/design/request-gate.md."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream.api.auth import TENANT, authenticate
from memstream.api.errors import error_body
from memstream.api.hosts import HostCheck, host_name
from memstream.errors import ApiError

# /mcp calls /v1 itself, but an unknown key is refused before its body is read here too.
_PROTECTED = ("/v1/", "/mcp")
_EVERY_ANSWER = [(b"x-content-type-options", b"nosniff")]
# The dashboard loads its own scripts and styles only (no inline ones) and calls only the
# API: anything else a page could be made to load or run is refused by the browser.
_DASHBOARD_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_DASHBOARD = [
    *_EVERY_ANSWER,
    (b"content-security-policy", _DASHBOARD_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class Gate:
    """Pure ASGI middleware: no per-request objects beyond what a refusal needs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        keys: dict[str, str],
        closed: bool | None = None,
        hosts: HostCheck | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.keys = keys
        # Closed with keys of operators only too: then no key opens /v1 or /mcp (401).
        self.closed = bool(keys) if closed is None else closed
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope["headers"])
        if self.hosts is not None:
            host = host_name(headers.get(b"host", b"").decode("latin-1"))
            if not self.hosts(host):
                await _refuse(send, 421, "host_not_allowed", f"this API does not answer {host!r}")
                return
        if self.closed and scope["path"].startswith(_PROTECTED):
            try:
                authorization = headers.get(b"authorization", b"").decode("latin-1")
                scope[TENANT] = authenticate(self.keys, authorization)
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
        extra = _DASHBOARD if scope["path"].startswith("/dashboard") else _EVERY_ANSWER
        body = _Counted(receive, send, self.max_body_bytes, self._too_large(), extra)
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

    __slots__ = (
        "_receive",
        "_send",
        "extra",
        "limit",
        "message",
        "received",
        "refused",
        "started",
    )

    def __init__(
        self, receive: Receive, send: Send, limit: int, message: str, extra: list[Any]
    ) -> None:
        self._receive = receive
        self._send = send
        self.extra = extra
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
            message = {**message, "headers": [*message.get("headers", []), *self.extra]}
        await self._send(message)


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = orjson.dumps(error_body(code, message))
    headers: list[Any] = [
        *_EVERY_ANSWER,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The unread rest of the body would otherwise be taken for the next request.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
