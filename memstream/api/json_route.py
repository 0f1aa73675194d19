"""The load path's routes (``POST /v1/context``, ``POST /v1/memories/search``): declared to
FastAPI like any other (their body, answer and errors in ``/openapi.json``), their JSON body
validated once and their answer serialised once, skipping FastAPI's dependency solving, its
second parse and its validation of the answer. ``Lane``, the innermost middleware, answers
such a request before Starlette's exception middleware, routing and request wrapper (about a
tenth of a search's CPU). Any other body goes through FastAPI's own handling, which says what
is wrong with it. Why: docs/design/request-gate.md."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import cached_property
from typing import Any, TypeVar, get_type_hints

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream.api.overload import read_body, replay

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class JsonBodyRoute(APIRoute):
    """A route whose endpoint is ``(body, request, services)``: a body that validates against
    the endpoint's ``body`` model is answered at once; anything else is handed to FastAPI's
    handler, which reads the same (cached) body and refuses it."""

    @cached_property
    def body_model(self) -> type[BaseModel]:
        """The model the endpoint's ``body`` is declared as."""
        model: type[BaseModel] = get_type_hints(self.endpoint)["body"]
        return model

    async def answer(self, request: Request, body: bytes) -> Response | None:
        """The endpoint's answer to a body that validates; None for FastAPI to refuse it."""
        valid = _valid(request, body, self.body_model)
        if valid is None:
            return None
        answer = await self.endpoint(valid, request, request.app.state.services)
        if isinstance(answer, Response):
            return answer
        status = self.status_code or 200
        return Response(answer.model_dump_json().encode(), status_code=status, media_type=JSON)

    def get_route_handler(self) -> Handler:
        framework = super().get_route_handler()

        async def handle(request: Request) -> Response:
            answer = await self.answer(request, await request.body())
            return answer if answer is not None else await framework(request)

        return handle


class Lane:
    """Pure ASGI middleware, the innermost: a ``POST`` to one of ``routes`` whose body validates
    is answered here, its errors answered by the app's handlers as Starlette would; any other
    request (another path or method, a body that does not validate) goes on to the app, its body
    given again, where FastAPI routes it and says what is wrong."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Iterable[JsonBodyRoute],
        handlers: Mapping[Any, Callable[..., Any]],
    ) -> None:
        self.app = app
        self.routes = {route.path: route for route in routes}
        # Exception and 500 are the server error middleware's, outside this one: left to it.
        self.handlers = {
            key: handler
            for key, handler in handlers.items()
            if key is not Exception and not isinstance(key, int)
        }
        self.status_handlers = {
            key: handler for key, handler in handlers.items() if isinstance(key, int) and key != 500
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http" and scope["method"] == "POST":
            route = self.routes.get(_route_path(scope))
        if route is None:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:
            return  # the client left before its body came: nothing to answer
        receive = replay(body, receive)
        scope["route"] = route
        request = Request(scope, receive, send)
        try:
            answer = await route.answer(request, body)
        except Exception as exc:
            answer = await self._handled(request, exc)
        if answer is None:
            del scope["route"]
            await self.app(scope, receive, send)
            return
        await answer(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception) -> Response:
        """The app's answer to ``exc`` (its handler found as Starlette's exception middleware
        finds it); an exception no handler takes goes on to the server error middleware."""
        handler = None
        if isinstance(exc, HTTPException):
            handler = self.status_handlers.get(exc.status_code)
        if handler is None:
            handler = next(
                (self.handlers[cls] for cls in type(exc).__mro__ if cls in self.handlers), None
            )
        if handler is None:
            raise exc
        if inspect.iscoroutinefunction(handler):
            response: Response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        exc.__traceback__ = None  # as Starlette: a reused exception gathers no tracebacks
        return response


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


def _route_path(scope: Scope) -> str:
    """The path the router matches: ``path`` without the app's ``root_path``."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root + "/") else path
