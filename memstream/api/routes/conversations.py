"""``/v1/conversations``: a conversation's stored history, oldest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from memstream.api.auth import check_tenant
from memstream.api.services import ServicesDep
from memstream_client.contract.api import Id, MessagesResponse, StoredMessageOut

router = APIRouter()


@router.get("/v1/conversations/{conversation_id}/messages", response_model=MessagesResponse)
async def messages(
    conversation_id: Id,
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> MessagesResponse:
    check_tenant(request, tenant_id)
    rows = await services.message_reads().recent(tenant_id, conversation_id, limit)
    return MessagesResponse(
        conversation_id=conversation_id,
        messages=[StoredMessageOut.model_validate(r, from_attributes=True) for r in rows],
    )
