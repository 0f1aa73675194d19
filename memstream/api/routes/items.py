"""``/v1/items``: memories under a key of the caller's choosing, with a JSON value (what a
LangGraph store keeps; ``memstream.keyed``): put, get, delete, search, namespaces."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from memstream.api.auth import check_tenant
from memstream.api.errors import NOT_FOUND
from memstream.api.services import ServicesDep
from memstream.errors import ApiError
from memstream.keyed import KeyedItem, KeyedItems, check_filter, check_text
from memstream.memory import USER_PROFILE, agent_cube
from memstream_client.contract.api import (
    DeletedResponse,
    Id,
    ItemKey,
    ItemOut,
    ItemPutRequest,
    ItemSearchRequest,
    ItemsResponse,
    NamespacePart,
    NamespacesResponse,
    UserNamespace,
)

router = APIRouter()


def _items(services: ServicesDep) -> KeyedItems:
    return KeyedItems(services.router, services.engine)


def _out(item: KeyedItem) -> ItemOut:
    return ItemOut(
        namespace=list(item.namespace),
        key=item.key,
        value=item.value,
        memory_id=item.memory_id,
        cube_id=item.cube_id,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=item.score,
    )


@router.put("/v1/items", response_model=ItemOut)
async def put_item(body: ItemPutRequest, request: Request, services: ServicesDep) -> ItemOut:
    """Store the value under the key; a new value supersedes the memory the key held."""
    check_tenant(request, body.tenant_id)
    allowed = {USER_PROFILE} | ({agent_cube(body.agent_id)} if body.agent_id else set())
    if body.cube_id not in allowed:
        raise ApiError(
            422, "invalid_cube", f"cube_id must be one of {sorted(allowed)} for this user and agent"
        )
    try:
        stored = await _items(services).put(
            body.tenant_id,
            body.user_id,
            body.agent_id,
            body.cube_id,
            body.namespace,
            body.key,
            body.value,
            memory_type=body.memory_type,
            importance=body.importance,
        )
    except ValueError as exc:  # a value with no text a memory can hold
        raise ApiError(422, "invalid_value", str(exc)) from None
    return _out(stored)


@router.get("/v1/items", response_model=ItemOut, responses=NOT_FOUND)
async def get_item(
    tenant_id: Annotated[Id, Query()],
    user_id: Annotated[Id, Query()],
    key: Annotated[ItemKey, Query()],
    request: Request,
    services: ServicesDep,
    namespace: Annotated[list[NamespacePart] | None, Query(max_length=16)] = None,
) -> ItemOut:
    check_tenant(request, tenant_id)
    found = await _items(services).get(tenant_id, user_id, namespace or [], key)
    if found is None:
        raise ApiError(404, "not_found", f"no item {key!r} in this namespace")
    return _out(found)


@router.delete("/v1/items", response_model=DeletedResponse)
async def delete_item(
    tenant_id: Annotated[Id, Query()],
    user_id: Annotated[Id, Query()],
    key: Annotated[ItemKey, Query()],
    request: Request,
    services: ServicesDep,
    namespace: Annotated[list[NamespacePart] | None, Query(max_length=16)] = None,
) -> DeletedResponse:
    """Delete the item and its memory (deleting what is not there deletes nothing)."""
    check_tenant(request, tenant_id)
    deleted = await _items(services).delete(tenant_id, user_id, namespace or [], key)
    return DeletedResponse(deleted=deleted)


@router.post("/v1/items/search", response_model=ItemsResponse)
async def search_items(
    body: ItemSearchRequest, request: Request, services: ServicesDep
) -> ItemsResponse:
    check_tenant(request, body.tenant_id)
    items = _items(services)
    try:
        check_text(*body.namespace_prefix)
        check_filter(body.filter)
    except ValueError as exc:
        raise ApiError(422, "invalid_filter", str(exc)) from None
    common = {"wanted": body.filter, "limit": body.limit, "offset": body.offset}
    if body.query and body.query.strip():
        found = await items.search(
            body.tenant_id,
            body.user_id,
            body.agent_id,
            body.namespace_prefix,
            body.query,
            **common,  # type: ignore[arg-type]
        )
    else:
        found = await items.listing(
            body.tenant_id,
            body.user_id,
            body.agent_id,
            body.namespace_prefix,
            **common,  # type: ignore[arg-type]
        )
    return ItemsResponse(items=[_out(i) for i in found])


@router.get("/v1/items/namespaces", response_model=NamespacesResponse)
async def item_namespaces(
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    user_id: Annotated[Id | None, Query()] = None,
) -> NamespacesResponse:
    """The namespaces holding items, per user."""
    check_tenant(request, tenant_id)
    found = await _items(services).namespaces(tenant_id, user_id)
    return NamespacesResponse(
        namespaces=[UserNamespace(user_id=u, namespace=list(ns)) for u, ns in found]
    )
