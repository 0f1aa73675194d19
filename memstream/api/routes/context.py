"""``POST /v1/context``: the load path, what every agent request waits on.

The route below declares it (its body, answer and errors in ``/openapi.json``) and answers
what the direct path leaves to it. ``ContextDirect`` answers the common request, a valid
JSON body for the key's own tenant, without FastAPI's routing, dependencies and body
handling: about a millisecond of CPU, an eighth of what a cold user's request costs.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream import metrics
from memstream.api.auth import TENANT, check_tenant
from memstream.api.overload import ARRIVED, LAGGING, replay
from memstream.api.services import Services, ServicesDep
from memstream_client.contract.api import ContextRequest, ContextResponse

router = APIRouter()
PATH = "/v1/context"


@router.post(PATH, response_model=ContextResponse)
async def context(body: ContextRequest, request: Request, services: ServicesDep) -> Response:
    check_tenant(request, body.tenant_id)
    # Serialised here: FastAPI would validate the answer against its own model again first.
    return Response(await _answer(body, request.scope, services), media_type="application/json")


async def _answer(body: ContextRequest, scope: Scope, services: Services) -> bytes:
    lagging = bool(scope.get(LAGGING))
    if lagging:
        metrics.OVERLOAD.labels("degraded", "lag").inc()
    answer = await services.loadpath.context(
        body, arrived=scope.get(ARRIVED), with_long_term=not lagging
    )
    return answer.model_dump_json().encode()


class ContextDirect:
    """Pure ASGI, inside the gate (keys, body limit) and outside FastAPI: a ``POST`` to
    ``/v1/context`` with a JSON body that validates, from a key of its tenant (or in open
    mode), is answered here as the route answers it. Anything else goes on to the app with
    its body, so that every refusal and error is the route's own."""

    def __init__(self, app: ASGIApp, *, state: Any) -> None:
        self.app = app
        self.state = state  # the application's: its settings, and its services once started

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        request = self._valid(scope, body)
        if request is None:
            await self.app(scope, replay(body, receive), send)
            return
        answer = await _answer(request, scope, self.state.services)
        await Response(answer, media_type="application/json")(scope, receive, send)

    def _valid(self, scope: Scope, body: bytes) -> ContextRequest | None:
        """The request, when the route would answer it in full; None to let the route say
        what is wrong (FastAPI reads a body as JSON for a JSON content type)."""
        content_type = dict(scope["headers"]).get(b"content-type", b"")
        if not content_type.startswith(b"application/json"):
            return None
        try:
            request = ContextRequest.model_validate_json(body)
        except ValidationError:
            return None
        # With keys, the gate has put the key's tenant in the scope (or refused the request).
        if self.state.settings.tenant_of_key and scope.get(TENANT) != request.tenant_id:
            return None
        return request


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: nothing to answer
            return b"".join(parts)
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)
