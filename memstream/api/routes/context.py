"""``POST /v1/context``: the load path, what every agent request waits on.

One route, declared to FastAPI (its body, answer and errors in ``/openapi.json``). Its handler
validates a JSON body itself, once, and skips FastAPI's dependency solving and second parse;
any other body goes through FastAPI's own handling, which says what is wrong with it. Why:
docs/design/request-gate.md.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError

from memstream import metrics
from memstream.api.auth import check_tenant
from memstream.api.overload import ARRIVED, LAGGING
from memstream.api.services import Services, ServicesDep
from memstream_client.contract.api import ContextRequest, ContextResponse

PATH = "/v1/context"
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class ContextRoute(APIRoute):
    """The route's handler: a body that validates is answered at once; anything else is
    handed to FastAPI's handler, which reads the same (cached) body and refuses it."""

    def get_route_handler(self) -> Handler:
        framework = super().get_route_handler()

        async def handle(request: Request) -> Response:
            body = _valid(request, await request.body())
            if body is None:
                return await framework(request)
            return await answer(body, request, request.app.state.services)

        return handle


router = APIRouter(route_class=ContextRoute)


@router.post(PATH, response_model=ContextResponse)
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


def _valid(request: Request, body: bytes) -> ContextRequest | None:
    """The request when it is JSON that validates; None to let FastAPI say what is wrong."""
    content_type = next((v for k, v in request.scope["headers"] if k == b"content-type"), b"")
    if not content_type.startswith(b"application/json"):
        return None
    try:
        return ContextRequest.model_validate_json(body)
    except ValidationError:
        return None
