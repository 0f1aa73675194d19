"""What every request passes before a route reads it: its API key, then its body's size.

FastAPI reads and parses a body before the route (and its tenant check) runs, so without this
one large body from anyone who can reach the port costs the process its size several times
over. Here an unknown key is refused (401) before any of the body is read, and a body over
``MEMSTREAM_API_MAX_BODY_BYTES`` is refused (413) whether it announces its length or streams
in chunks; the route still decides whether the key may touch the request's tenant (403).
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
            elif int(length) > self.max_body_bytes:
                await _refuse(send, 413, "payload_too_large", self._too_large())
            else:
                # The server holds the body to its announced length.
                await self.app(scope, receive, send)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b""):
            await self.app(scope, receive, send)
            return
        # A streamed body: read it here, up to the limit, and hand it on whole.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _refuse(send, 413, "payload_too_large", self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _too_large(self) -> str:
        return f"request bodies are limited to {self.max_body_bytes} bytes"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # only a disconnect is left to wait for
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


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
