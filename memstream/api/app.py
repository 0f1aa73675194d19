"""The FastAPI application: ``create_app(settings)``; ``memstream api`` serves it with uvicorn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memstream.api import errors
from memstream.api.routes import agents, context, conversations, dashboard, health, memories, stats
from memstream.api.services import Services
from memstream.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.tenant_of_key:
            log.warning("MEMSTREAM_API_KEYS is empty: the API is open to every tenant (dev mode)")
        services = Services.open(settings)
        app.state.services = services
        try:
            yield
        finally:
            await services.close()

    app = FastAPI(
        title="memstream query API",
        version="1",
        lifespan=lifespan,
        responses={
            401: {"description": "no or unknown API key"},
            403: {"description": "the key's tenant is not the request's tenant"},
            422: {"description": "invalid request"},
        },
    )
    app.state.settings = settings
    errors.install(app)
    # Registration order is the order of the paths in /openapi.json.
    for module in (stats, context, conversations, memories, agents, health, dashboard):
        app.include_router(module.router)
    return app
