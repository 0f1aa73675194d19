"""``/mcp``: the memory tools over streamable HTTP, behind the same keys and checks as ``/v1``:
each tool call is sent to this app's own ``/v1`` routes, for the user the connection names.
Why: docs/design/mcp-endpoint.md."""

from __future__ import annotations

import asyncio
import gc
import importlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream.api.auth import authenticate
from memstream.api.errors import error_body
from memstream.errors import ApiError
from memstream.settings import Settings
from memstream_client import AsyncClient
from memstream_client.mcp.scope import Memory
from memstream_client.mcp.scope import Scope as MemoryScope

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer

    from memstream_client.mcp.tools import Connect

PATH = "/mcp"
TENANT_HEADER = "x-memstream-tenant-id"
USER_HEADER = "x-memstream-user-id"
AGENT_HEADER = "x-memstream-agent-id"
# Where a request's scope waits for its tool calls: in the request's ASGI scope.
_SCOPE = "memstream.mcp.scope"
# The headers a tool call carries to /v1 unchanged.
_FORWARDED = ("authorization", "host")


def _id(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    if not value.strip() or len(value) > 128:
        raise ApiError(400, "invalid_request", f"{name} must be 1 to 128 characters")
    if value != value.strip():
        raise ApiError(400, "invalid_request", f"{name} must not start or end with white space")
    return value


def scope_of(headers: Mapping[str, str], keys: dict[str, str]) -> MemoryScope:
    """Whose memory a request reaches: 400 without a user, or without a tenant in open mode."""
    tenant = _id(headers, TENANT_HEADER)
    if tenant is None and keys:
        tenant = authenticate(keys, headers.get("authorization", ""))
    if tenant is None:
        raise ApiError(400, "invalid_request", f"send {TENANT_HEADER}: no API keys are set")
    user = _id(headers, USER_HEADER)
    if user is None:
        raise ApiError(400, "invalid_request", f"send {USER_HEADER}: whose memory to reach")
    return MemoryScope(tenant, user, _id(headers, AGENT_HEADER))


class _Within(httpx.AsyncBaseTransport):
    """The app itself, each request carrying the caller's headers."""

    def __init__(self, app: ASGIApp, headers: dict[str, str]) -> None:
        self.asgi = httpx.ASGITransport(app=app)
        self.headers = headers

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers.update(self.headers)
        return await self.asgi.handle_async_request(request)


def through(app: ASGIApp) -> Connect:
    """How a tool call at ``/mcp`` reaches memstream: ``app``'s own ``/v1``, as its caller."""

    @asynccontextmanager
    async def connect(ctx: Context) -> AsyncIterator[Memory]:
        request = ctx.request_context.request
        assert isinstance(request, Request), "the tools at /mcp answer HTTP requests only"
        headers = {name: request.headers[name] for name in _FORWARDED if name in request.headers}
        # No retries here: a 503 (overloaded, a database away) is the caller's to retry.
        transport = _Within(app, headers)
        async with AsyncClient("http://memstream", retries=0, transport=transport) as api:
            yield Memory(api, request.scope[_SCOPE])

    return connect


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``; ``close`` stops the SDK's server once the app stops."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self._handler: ASGIApp | None = None
        self._starting = asyncio.Lock()
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            # The SDK would hold a GET open as an event stream that never carries anything.
            refusal = JSONResponse(
                error_body("method_not_allowed", "/mcp is stateless: send each message as a POST"),
                status_code=405,
                headers={"allow": "POST"},
            )
            await refusal(scope, receive, send)
            return
        try:
            scope[_SCOPE] = scope_of(Headers(scope=scope), self.settings.tenant_of_key)
        except ApiError as exc:
            refusal = JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)
            await refusal(scope, receive, send)
            return
        handler = self._handler or await self._start()
        await handler(scope, receive, send)

    async def _start(self) -> ASGIApp:
        async with self._starting:
            if self._handler is None:
                self._handler = await self._serve()
            return self._handler

    def _server(self) -> MCPServer:
        """The SDK imported and the tools' server built: a second of CPU, so in a thread."""
        importlib.import_module("memstream_client.mcp.tools")
        from memstream_client.mcp.tools import memory_server

        # Building the tools' argument models costs 20 to 30 ms of CPU more: off the loop too.
        return memory_server(through(self.app), log_level=self.settings.log_level)

    async def _serve(self) -> ASGIApp:
        server = await asyncio.to_thread(self._server)
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
        from mcp.server.transport_security import TransportSecuritySettings

        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=self.settings.api_max_body_bytes,
            # The gate answers only the hosts it allows (memstream.api.hosts), on /mcp as on
            # /v1; the SDK's own list would refuse every name but localhost.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = server.session_manager
        running = asyncio.Event()

        async def run() -> None:
            # The SDK's task group is entered and left in this one task, as anyio requires.
            async with manager.run():
                running.set()
                await self._stop.wait()

        self._runner = asyncio.create_task(run())
        started = asyncio.create_task(running.wait())
        await asyncio.wait({self._runner, started}, return_when=asyncio.FIRST_COMPLETED)
        if not running.is_set():
            started.cancel()
            await self._runner  # raises what stopped it
        handler = StreamableHTTPASGIApp(manager)
        # The SDK's modules and server live as long as the process, like what startup froze
        # (memstream.api.startup): left in, the next full collection walked them all on the
        # loop, 0.1 to 0.15 s a few seconds after the first /mcp request.
        gc.freeze()
        return handler

    async def close(self) -> None:
        self._stop.set()
        if self._runner is not None:
            # A server that failed to start has told the request that started it already.
            await asyncio.gather(self._runner, return_exceptions=True)
