"""``/v1/memories`` and ``/v1/users/{user_id}/memories``: long-term memory through each agent's
provider: list, search, add by hand, delete one, forget a user."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated

from aiokafka.errors import KafkaError
from fastapi import APIRouter, Path, Query, Request

from memstream import forget, metrics
from memstream.api.auth import check_tenant
from memstream.api.errors import NOT_FOUND
from memstream.api.json_route import json_post
from memstream.api.overload import ARRIVED
from memstream.api.services import ServicesDep
from memstream.errors import ApiError, ServiceUnavailable
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory, agent_cube
from memstream.providers import degraded
from memstream.store.owners import memory_of_user
from memstream.text.dates import dated_query
from memstream_client.contract.api import (
    AddMemoryRequest,
    DeletedResponse,
    Id,
    MemoriesResponse,
    MemoryOut,
    SearchRequest,
)

router = APIRouter()


@router.get("/v1/memories", response_model=MemoriesResponse)
async def list_memories(
    tenant_id: Annotated[Id, Query()],
    user_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    agent_id: Annotated[Id | None, Query()] = None,
) -> MemoriesResponse:
    check_tenant(request, tenant_id)
    provider = await services.router.for_agent(tenant_id, agent_id)
    return _items(await provider.list_live(tenant_id, user_id, agent_id))


@json_post(router, "/v1/memories/search", response_model=MemoriesResponse)
async def search_memories(
    body: SearchRequest, request: Request, services: ServicesDep
) -> MemoriesResponse:
    check_tenant(request, body.tenant_id)
    # The load path's long-term limit, from the request's arrival: a search waiting on a busy
    # database (its pool, a lock) gives its slot back and says so instead of waiting.
    loop = asyncio.get_running_loop()
    arrived = request.scope.get(ARRIVED, loop.time())
    limit = request.app.state.settings.long_term_timeout_seconds
    # Relative dates made absolute here, for every provider.
    query = dated_query(body.query, body.at)
    try:
        async with asyncio.timeout_at(arrived + limit) as within:
            provider = await services.router.for_agent(body.tenant_id, body.agent_id)
            with degraded.collect() as fell_back:  # e.g. "embeddings": answered lexically
                found = await provider.search(
                    body.tenant_id, body.user_id, body.agent_id, query, top_k=body.top_k
                )
    except TimeoutError:
        if not within.expired():
            raise
        metrics.OVERLOAD.labels("refused", "search_deadline").inc()
        raise ApiError(
            503, "overloaded", f"the search did not finish within {limit:g} s; retry after 1 s"
        ) from None
    answer = _items(sorted(found, key=lambda m: m.score, reverse=True))
    answer.degraded = fell_back
    return answer


@router.post("/v1/memories", response_model=MemoryOut, status_code=201)
async def add_memory(body: AddMemoryRequest, request: Request, services: ServicesDep) -> MemoryOut:
    check_tenant(request, body.tenant_id)
    allowed = {USER_PROFILE} | ({agent_cube(body.agent_id)} if body.agent_id else set())
    if body.cube_id not in allowed:
        raise ApiError(
            422,
            "invalid_cube",
            f"cube_id must be one of {sorted(allowed)} for this user and agent",
        )
    provider = await services.router.for_agent(body.tenant_id, body.agent_id)
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


@router.delete("/v1/memories/{memory_id}", response_model=DeletedResponse, responses=NOT_FOUND)
async def delete_memory(
    memory_id: Annotated[str, Path(min_length=1, max_length=64)],
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    user_id: Annotated[
        Id | None, Query(description="delete it only if it is this user's memory (else 404)")
    ] = None,
) -> DeletedResponse:
    check_tenant(request, tenant_id)
    if user_id is not None and not await memory_of_user(
        services.engine, tenant_id, memory_id, user_id
    ):
        raise ApiError(404, "not_found", f"no live memory {memory_id!r} of this user")
    deleted = await forget.forget_memory(services.router, services.engine, tenant_id, memory_id)
    if not deleted:
        raise ApiError(404, "not_found", f"no live memory {memory_id!r} in this tenant")
    return DeletedResponse(deleted=deleted)


@router.delete("/v1/users/{user_id}/memories", response_model=DeletedResponse)
async def forget_user(
    user_id: Id,
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    purge_history: Annotated[
        bool, Query(description="also delete the user's messages, summaries and cached copies")
    ] = False,
) -> DeletedResponse:
    """Forget a user in every provider the tenant has used (``memstream.forget``)."""
    check_tenant(request, tenant_id)
    try:
        ends = await forget.input_ends(services.settings)
    except (ServiceUnavailable, KafkaError, OSError) as exc:
        # Without the partitions' ends no stage could tell what came before the forget.
        raise ApiError(
            503, "broker_unavailable", f"the broker does not answer, nothing forgotten: {exc}"
        ) from None
    forgotten = await forget.forget_user(
        services.router,
        services.engine,
        services.cache,
        tenant_id,
        user_id,
        ends=ends,
        purge_history=purge_history,
    )
    return DeletedResponse(deleted=forgotten.deleted)


def _item(m: MemoryItem) -> MemoryOut:
    return MemoryOut.model_validate(m, from_attributes=True)


def _items(items: Sequence[MemoryItem]) -> MemoriesResponse:
    return MemoriesResponse(items=[_item(m) for m in items])
