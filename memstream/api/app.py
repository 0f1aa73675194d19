"""The FastAPI application: ``create_app(settings)``; ``memstream api`` serves it with uvicorn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline
from starlette.routing import Route

from memstream import tracing
from memstream.api import errors, mcp, startup
from memstream.api.fairness import Policy, Tenants
from memstream.api.gate import Gate
from memstream.api.hosts import host_check, loopback, parse_allowed
from memstream.api.json_route import JsonBodyRoute, Lane
from memstream.api.overload import Admission
from memstream.api.routes import (
    agents,
    context,
    conversations,
    dashboard,
    export,
    health,
    items,
    memories,
    memory_history,
    stats,
)
from memstream.api.services import Services
from memstream.errors import ConfigurationError
from memstream.settings import Settings

log = logging.getLogger(__name__)

DESCRIPTION = (
    "The memory of a multi-agent platform: `POST /v1/context` assembles an agent's context "
    "(short-term window and long-term memory) before a model call; the other `/v1` routes "
    "read and manage history, memories and agent configuration. With `MEMSTREAM_API_KEYS` "
    "set, every `/v1` call needs `Authorization: Bearer <key>`, and a key may only touch its "
    'own tenant. Errors answer `{"error": {"code", "message"}}` with a 4xx status. `/mcp` '
    "serves the same memory to MCP hosts (streamable HTTP), behind the same keys."
)


def create_app(settings: Settings) -> FastAPI:
    """The query API; refuses open mode (no API keys) on an address other than loopback
    unless ``MEMSTREAM_API_ALLOW_OPEN`` says so."""
    open_mode = settings.api_open
    if open_mode and not loopback(settings.api_host) and not settings.api_allow_open:
        raise ConfigurationError(
            f"MEMSTREAM_API_KEYS is empty and the API would listen on {settings.api_host!r}:"
            " every tenant's data would be open to anyone who reaches the port. Set"
            " MEMSTREAM_API_KEYS=key:tenant, bind to 127.0.0.1, or set"
            " MEMSTREAM_API_ALLOW_OPEN=true to accept that"
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if open_mode:
            log.warning(
                "MEMSTREAM_API_KEYS and MEMSTREAM_API_ADMIN_KEYS are empty: the API is open to"
                " every tenant (dev mode)"
            )
        services = Services.open(settings)
        app.state.services = services
        if services.reads.lag is not None:
            # The replica is read from the first request on when its lag is known to be low.
            await services.reads.lag.check()
        # Before ready: the first requests would pay for this with a late loop (shed answers).
        await startup.prepare(app.router, services)
        try:
            yield
        finally:
            await tools.close()
            await services.close()

    # /docs and /redoc with their scripts served from the package, not a CDN: they work offline.
    app = FastAPIOffline(title="memstream query API", version="1", lifespan=lifespan)
    app.state.settings = settings
    errors.install(app)
    # Registration order is the order of the paths in /openapi.json.
    for module in (context, stats, conversations, memories, memory_history, export, items, agents):
        app.include_router(module.router, responses=errors.V1_ERRORS)
    for module in (health, dashboard):
        app.include_router(module.router)
    tools = mcp.McpEndpoint(app, settings)
    app.router.routes.append(Route(mcp.PATH, tools, include_in_schema=False))
    # Innermost: the load path's valid requests answered without routing.
    lanes = [
        r for m in (context, memories) for r in m.router.routes if isinstance(r, JsonBodyRoute)
    ]
    app.add_middleware(Lane, routes=lanes, handlers=app.exception_handlers)
    # Inside the gate, which knows the key's tenant: the tenant's share, then a slot.
    app.add_middleware(
        Admission,
        max_in_flight=settings.api_max_in_flight,
        queue_seconds=settings.api_queue_seconds,
        min_in_flight=settings.api_min_in_flight,
        loop_target_seconds=settings.api_loop_target_seconds,
        lag_seconds=settings.api_lag_seconds,
        tenants=Tenants(
            Policy(
                max_in_flight=settings.api_tenant_max_in_flight,
                rate=settings.api_tenant_rate,
                max_body_bytes=settings.api_tenant_max_body_bytes_in_flight,
                in_flight_overrides=settings.tenant_in_flight_overrides,
                rate_overrides=settings.tenant_rate_overrides,
            ),
            max_body_bytes=settings.api_max_body_bytes_in_flight,
        ),
        max_body_bytes=settings.api_max_body_bytes,
        # Seen with less than half its short-term time left, its answer would lack history.
        late_seconds=settings.short_term_timeout_seconds / 2,
    )
    # Outermost: a wrong host or key is refused before anything else is spent on it.
    app.add_middleware(
        Gate,
        max_body_bytes=settings.api_max_body_bytes,
        keys=settings.tenant_of_key,
        closed=not open_mode,
        hosts=host_check(parse_allowed(settings.api_allowed_hosts), open_mode),
    )
    if tracing.configure("memstream-api", user_ids=settings.trace_user_ids):
        app.add_middleware(tracing.RequestSpans)  # outermost: the whole request, refusals too
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The generated document plus the bearer scheme on every ``/v1`` route, built once."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes
            )
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key of MEMSTREAM_API_KEYS (none in open mode)",
                }
            }
            for path, operations in schema["paths"].items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi
