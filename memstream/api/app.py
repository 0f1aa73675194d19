"""The FastAPI application: ``create_app(settings)``; ``memstream api`` serves it with uvicorn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memstream.api import errors, stats
from memstream.api.auth import check_tenant
from memstream.api.models import (
    AddMemoryRequest,
    AgentConfigBody,
    AgentConfigOut,
    ContextRequest,
    ContextResponse,
    DeletedResponse,
    Id,
    MemoriesResponse,
    MemoryOut,
    MessagesResponse,
    SearchRequest,
    StoredMessageOut,
)
from memstream.errors import ApiError
from memstream.loadpath.assemble import LoadPath
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory, agent_cube
from memstream.settings import Settings
from memstream.store.agents import AgentConfig

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.tenant_of_key:
            log.warning("MEMSTREAM_API_KEYS is empty: the API is open to every tenant (dev mode)")
        app.state.loadpath = LoadPath.open(settings)
        try:
            yield
        finally:
            await app.state.loadpath.close()

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
    app.include_router(stats.router)

    def lp(request: Request) -> LoadPath:
        loadpath: LoadPath = request.app.state.loadpath
        return loadpath

    @app.post("/v1/context", response_model=ContextResponse)
    async def context(body: ContextRequest, request: Request) -> ContextResponse:
        check_tenant(request, body.tenant_id)
        return await lp(request).context(body)

    @app.get("/v1/conversations/{conversation_id}/messages", response_model=MessagesResponse)
    async def messages(
        conversation_id: Id,
        tenant_id: Annotated[Id, Query()],
        request: Request,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> MessagesResponse:
        check_tenant(request, tenant_id)
        rows = await lp(request).resources.messages.recent(tenant_id, conversation_id, limit)
        return MessagesResponse(
            conversation_id=conversation_id,
            messages=[
                StoredMessageOut(
                    event_id=r.event_id,
                    role=r.role,
                    message_type=r.message_type,
                    content=r.content,
                    token_count=r.token_count,
                    created_at=r.created_at,
                )
                for r in rows
            ],
        )

    @app.get("/v1/memories", response_model=MemoriesResponse)
    async def list_memories(
        tenant_id: Annotated[Id, Query()],
        user_id: Annotated[Id, Query()],
        request: Request,
        agent_id: Annotated[Id | None, Query()] = None,
    ) -> MemoriesResponse:
        check_tenant(request, tenant_id)
        provider = await lp(request).provider_for(tenant_id, agent_id)
        return _items(await provider.list_live(tenant_id, user_id, agent_id))

    @app.post("/v1/memories/search", response_model=MemoriesResponse)
    async def search_memories(body: SearchRequest, request: Request) -> MemoriesResponse:
        check_tenant(request, body.tenant_id)
        provider = await lp(request).provider_for(body.tenant_id, body.agent_id)
        found = await provider.search(
            body.tenant_id, body.user_id, body.agent_id, body.query, top_k=body.top_k
        )
        return _items(sorted(found, key=lambda m: m.score, reverse=True))

    @app.post("/v1/memories", response_model=MemoryOut, status_code=201)
    async def add_memory(body: AddMemoryRequest, request: Request) -> MemoryOut:
        check_tenant(request, body.tenant_id)
        allowed = {USER_PROFILE} | ({agent_cube(body.agent_id)} if body.agent_id else set())
        if body.cube_id not in allowed:
            raise ApiError(
                422,
                "invalid_cube",
                f"cube_id must be one of {sorted(allowed)} for this user and agent",
            )
        provider = await lp(request).provider_for(body.tenant_id, body.agent_id)
        (stored,) = await provider.add(
            [
                NewMemory(
                    tenant_id=body.tenant_id,
                    user_id=body.user_id,
                    agent_id=body.agent_id,
                    cube_id=body.cube_id,
                    memory_type=body.memory_type,
                    content=body.content,
                    importance=body.importance,
                )
            ]
        )
        return _item(stored)

    @app.delete("/v1/memories/{memory_id}", response_model=DeletedResponse)
    async def delete_memory(
        memory_id: Annotated[str, Path(min_length=1, max_length=64)],
        tenant_id: Annotated[Id, Query()],
        request: Request,
    ) -> DeletedResponse:
        check_tenant(request, tenant_id)
        deleted: list[str] = []
        for provider in await lp(request).tenant_providers(tenant_id):
            deleted += await provider.delete(tenant_id, [memory_id])
        if not deleted:
            raise ApiError(404, "not_found", f"no live memory {memory_id!r} in this tenant")
        return DeletedResponse(deleted=deleted)

    @app.delete("/v1/users/{user_id}/memories", response_model=DeletedResponse)
    async def forget_user(
        user_id: Id, tenant_id: Annotated[Id, Query()], request: Request
    ) -> DeletedResponse:
        check_tenant(request, tenant_id)
        deleted: list[str] = []
        for provider in await lp(request).tenant_providers(tenant_id):
            deleted += await provider.delete_user(tenant_id, user_id)
        return DeletedResponse(deleted=deleted)

    @app.get("/v1/agents/{agent_id}/config", response_model=AgentConfigOut)
    async def get_config(
        agent_id: Id, tenant_id: Annotated[Id, Query()], request: Request
    ) -> AgentConfigOut:
        check_tenant(request, tenant_id)
        config = await lp(request).agents.get(tenant_id, agent_id)
        if config is None:
            raise ApiError(404, "not_found", f"agent {agent_id!r} has no configuration")
        return _config_out(config)

    @app.put("/v1/agents/{agent_id}/config", response_model=AgentConfigOut)
    async def put_config(
        agent_id: Id, body: AgentConfigBody, tenant_id: Annotated[Id, Query()], request: Request
    ) -> AgentConfigOut:
        check_tenant(request, tenant_id)
        config = AgentConfig(tenant_id=tenant_id, agent_id=agent_id, **body.model_dump())
        await lp(request).agents.put(config)
        return _config_out(config)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        checks = await lp(request).readiness()
        ready = all(v in ("ok", "disabled") for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks},
            status_code=200 if ready else 503,
        )

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app


def _config_out(config: AgentConfig) -> AgentConfigOut:
    return AgentConfigOut(
        tenant_id=config.tenant_id,
        agent_id=config.agent_id,
        long_memory_provider=config.long_memory_provider,
        open_long_memory=config.open_long_memory,
        context_rounds=config.context_rounds,
        model_target_id=config.model_target_id,
    )


def _item(m: MemoryItem) -> MemoryOut:
    return MemoryOut(
        id=m.id,
        cube_id=m.cube_id,
        memory_type=m.memory_type,
        content=m.content,
        score=m.score,
        source_event_ids=list(m.source_event_ids),
        created_at=m.created_at,
    )


def _items(items: Sequence[MemoryItem]) -> MemoriesResponse:
    return MemoriesResponse(items=[_item(m) for m in items])
