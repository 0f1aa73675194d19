"""``POST /v1/context``: the load path, what every agent request waits on."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from memstream import metrics
from memstream.api.auth import check_tenant
from memstream.api.overload import ARRIVED, LAGGING
from memstream.api.services import ServicesDep
from memstream_client.contract.api import ContextRequest, ContextResponse

router = APIRouter()


@router.post("/v1/context", response_model=ContextResponse)
async def context(body: ContextRequest, request: Request, services: ServicesDep) -> Response:
    check_tenant(request, body.tenant_id)
    lagging = bool(request.scope.get(LAGGING))
    if lagging:
        metrics.OVERLOAD.labels("degraded", "lag").inc()
    answer = await services.loadpath.context(
        body, arrived=request.scope.get(ARRIVED), with_long_term=not lagging
    )
    # Serialised here: FastAPI would validate the answer against its own model again first.
    return Response(answer.model_dump_json(), media_type="application/json")
