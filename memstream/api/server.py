"""``memstream api``'s HTTP server: uvicorn on httptools, with deadlines and sizes for what a
client sends before the application sees it.

uvicorn bounds neither how long a request's head may take to arrive nor its size, nor how
long a body may take: one socket dribbling a header line, or a head of 64 MiB, holds the
process's memory and a connection as long as the client likes. ``BoundedProtocol`` closes a
connection whose head is not complete ``MEMSTREAM_API_HEADER_SECONDS`` after its first byte
(or after the connection opened), answers 431 to a head over ``MEMSTREAM_API_MAX_HEADER_BYTES``
or with more than ``MEMSTREAM_API_MAX_HEADERS`` fields, and answers 408 to a body not complete
``MEMSTREAM_API_BODY_SECONDS`` after its head (the application then sees the client leave).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
import orjson
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memstream import metrics
from memstream.api.errors import error_body
from memstream.settings import ApiSettings, Settings

RECEIVED = "memstream.received"
"""Scope key: when the request's last byte was read (the loop's clock), set by the server."""

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _TooManyHeaders(Exception):
    """Raised from the parser's callback, which then fails the ``feed_data`` it came from."""


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines and limits for the request's head and body."""

    # Set on the class by ``bounded_protocol``: one server, one set of limits.
    header_seconds = 5.0
    body_seconds = 10.0
    max_header_bytes = 16 * 1024
    max_headers = 100

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_head = True
        self._head_bytes = 0
        self._header_count = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A connection that sends nothing at all is closed too.
        self._arm(self.header_seconds, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._reading_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            if self._header_count > self.max_headers:
                self._refuse(431, "too_many_headers", f"at most {self.max_headers} header fields")
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserUpgrade:
            # No WebSocket route: the request is answered as plain HTTP.
            self._unsupported_upgrade_warning()
        # Checked after the feed: the bytes of this read past the head's end are its body's.
        # What is held before the refusal is the limit plus one read at most.
        if self._reading_head and self._head_bytes > self.max_header_bytes:
            limit = self.max_header_bytes
            self._refuse(431, "headers_too_large", f"request heads are limited to {limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading_head = True
        self._header_count = 0
        if self._deadline is None:  # a request after an idle keep-alive connection
            self._arm(self.header_seconds, self._head_late)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            raise _TooManyHeaders
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._disarm()
        super().on_headers_complete()
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm(self.body_seconds, self._body_late)

    def on_message_complete(self) -> None:
        self._disarm()
        if self.scope is not None:
            self.scope[RECEIVED] = self.loop.time()  # type: ignore[literal-required]
        super().on_message_complete()
        self._reading_head = True
        self._head_bytes = 0

    def _arm(self, seconds: float, late: Any) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head behind a request still being answered: its turn comes later.
            self._arm(self.header_seconds, self._head_late)
            return
        if self._head_bytes:
            self._refuse(
                408, "header_timeout", f"request heads must arrive within {self.header_seconds:g} s"
            )
        else:  # nothing sent: nothing to answer
            metrics.API_CONNECTIONS_CUT.labels("idle").inc()
            self.transport.close()

    def _body_late(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or cycle.response_complete:
            return
        if cycle.response_started:
            metrics.API_CONNECTIONS_CUT.labels("body_timeout").inc()
            self.transport.close()
            return
        # The application sees the client leave and its answer, if any, is dropped.
        cycle.disconnected = True
        cycle.message_event.set()
        self._refuse(
            408, "body_timeout", f"request bodies must arrive within {self.body_seconds:g} s"
        )

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` and close: the rest of what the client sends is never read."""
        metrics.API_CONNECTIONS_CUT.labels(code).inc()
        body = orjson.dumps(error_body(code, message))
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"x-content-type-options: nosniff\r\nconnection: close\r\n\r\n"
        ) % (status, _REASONS[status], len(body))
        self._reading_head = False
        self._disarm()
        self.transport.write(head + body)
        self.transport.close()


def bounded_protocol(settings: ApiSettings) -> type[BoundedProtocol]:
    """A ``BoundedProtocol`` class with the settings' limits."""
    return type(
        "BoundedProtocol",
        (BoundedProtocol,),
        {
            "header_seconds": settings.api_header_seconds,
            "body_seconds": settings.api_body_seconds,
            "max_header_bytes": settings.api_max_header_bytes,
            "max_headers": settings.api_max_headers,
        },
    )


def serve(settings: Settings) -> None:
    """Serve the query API until stopped."""
    from memstream.api.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.api_host,
        port=settings.api_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        http=bounded_protocol(settings),
        # Every connection and every request task counts; past it, uvicorn answers 503.
        limit_concurrency=settings.api_max_connections,
    )
