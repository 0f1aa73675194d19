"""``POST /v1/context``: the load path, what every agent request waits on. One route, with
the load path's handler (``memstream.api.json_route``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from memstream import metrics
from memstream.api.auth import check_tenant
from memstream.api.json_route import json_post
from memstream.api.overload import ARRIVED, LAGGING
from memstream.api.services import Services, ServicesDep
from memstream_client.contract.api import ContextRequest, ContextResponse

PATH = "/v1/context"

router = APIRouter()


@json_post(router, PATH, response_model=ContextResponse)
async def context(body: ContextRequest, request: Request, services: ServicesDep) -> Response:
    return await answer(body, request, services)


async def answer(body: ContextRequest, request: Request, services: Services) -> Response:
    """The one place a context request is answered: the key's tenant checked, then the load
    path, serialised here (FastAPI would validate the answer against its model again)."""
    check_tenant(request, body.tenant_id)
    scope = request.scope
    lagging = bool(scope.get(LAGGING))
    if lagging:
        metrics.OVERLOAD.labels("degraded", "lag").inc()
    context = await services.loadpath.context(
        body, arrived=scope.get(ARRIVED), with_long_term=not lagging
    )
    return Response(context.model_dump_json().encode(), media_type="application/json")
