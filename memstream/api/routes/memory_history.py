"""``/v1/memories/{id}/history``: a memory's chain of supersessions, oldest first
(``memstream.store.memory_history``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from memstream.api.auth import check_tenant
from memstream.api.errors import NOT_FOUND
from memstream.api.services import ServicesDep
from memstream.errors import ApiError
from memstream.store.memory_history import HistoryResponse, history
from memstream_client.contract.api import Id

router = APIRouter()


@router.get("/v1/memories/{memory_id}/history", response_model=HistoryResponse, responses=NOT_FOUND)
async def memory_history(
    memory_id: Annotated[str, Path(min_length=1, max_length=128)],
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
) -> HistoryResponse:
    """What the memory superseded and what superseded it, each with its text, times, cause
    and source messages. Read from the primary: a change is there the moment it is made."""
    check_tenant(request, tenant_id)
    found = await history(services.engine, tenant_id, memory_id)
    if found is None:
        raise ApiError(404, "not_found", f"no memory {memory_id!r} in this tenant")
    return found
