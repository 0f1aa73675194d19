"""The load path's routes (``POST /v1/context``, ``POST /v1/memories/search``): declared to
FastAPI like any other (their body, answer and errors in ``/openapi.json``), with a handler
that validates a JSON body itself, once, and serialises the answer once, skipping FastAPI's
dependency solving, its second parse and its validation of the answer against the model; any
other body goes through FastAPI's own handling, which says what is wrong with it. Why:
docs/design/request-gate.md."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, get_type_hints

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class JsonBodyRoute(APIRoute):
    """A route whose endpoint is ``(body, request, services)``: a body that validates against
    the endpoint's ``body`` model is answered at once; anything else is handed to FastAPI's
    handler, which reads the same (cached) body and refuses it."""

    def get_route_handler(self) -> Handler:
        framework = super().get_route_handler()
        endpoint = self.endpoint
        model: type[BaseModel] = get_type_hints(endpoint)["body"]
        status = self.status_code or 200

        async def handle(request: Request) -> Response:
            body = _valid(request, await request.body(), model)
            if body is None:
                return await framework(request)
            answer = await endpoint(body, request, request.app.state.services)
            if isinstance(answer, Response):
                return answer
            return Response(answer.model_dump_json().encode(), status_code=status, media_type=JSON)

        return handle


JSON = "application/json"


def json_post(router: APIRouter, path: str, **options: Any) -> Callable[[Endpoint], Endpoint]:
    """``@router.post(path, **options)`` with the route a ``JsonBodyRoute``."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.add_api_route(
            path, endpoint, methods=["POST"], route_class_override=JsonBodyRoute, **options
        )
        return endpoint

    return register


def _valid(request: Request, body: bytes, model: type[BaseModel]) -> BaseModel | None:
    """The body when it is JSON that validates; None to let FastAPI say what is wrong."""
    content_type = next((v for k, v in request.scope["headers"] if k == b"content-type"), b"")
    if not content_type.startswith(b"application/json"):
        return None
    try:
        return model.model_validate_json(body)
    except ValidationError:
        return None
