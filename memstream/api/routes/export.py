"""``GET /v1/users/{user_id}/export``: a user's live memories as JSON lines, the lines of
``memstream export``, streamed as they are read, a page at a time (``memstream.transfer``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from memstream.api.auth import check_tenant
from memstream.api.overload import STREAMING
from memstream.api.services import ServicesDep
from memstream.transfer.export import Selection, export_lines
from memstream_client.contract.api import Id

router = APIRouter()
MEDIA_TYPE = "application/x-ndjson"


@router.get(
    "/v1/users/{user_id}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {MEDIA_TYPE: {}}, "description": "one memory a line"}},
)
async def export_user(
    user_id: Id,
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    history: Annotated[bool, Query(description="also what each memory replaced")] = False,
) -> StreamingResponse:
    """Every live memory of the user, in every provider the tenant uses (a data-access
    request). The first page is read before the answer starts, so a failing store answers
    an error rather than a cut-off stream."""
    check_tenant(request, tenant_id)
    lines = export_lines(
        services.router, services.engine, Selection(tenant_id, user_id, history=history)
    )
    first = [line async for line in _first(lines)]

    async def body() -> AsyncIterator[bytes]:
        for line in first:
            yield line
        async for line in lines:
            yield line

    request.scope[STREAMING] = True  # the stream gives its slot back as it starts
    return StreamingResponse(body(), media_type=MEDIA_TYPE)


async def _first(lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The first line (its page is read with it), or nothing for an empty export."""
    async for line in lines:
        yield line
        return
