"""Error responses: ``{"error": {"code", "message"}}`` with a 4xx status, never a bare 5xx."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from memstream.errors import ApiError, ProviderUnavailable
from memstream.store.database import lost_deadlock
from memstream_client.contract.api import ErrorResponse

log = logging.getLogger(__name__)


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


def _documented(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


# The error answers every ``/v1`` route may give, as /openapi.json documents them.
V1_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _documented("no API key, or an unknown one (when MEMSTREAM_API_KEYS is set)"),
    403: _documented("the key's tenant is not the request's tenant"),
    408: _documented("the head or body did not arrive within its deadline (connection closed)"),
    413: _documented("the request body is over MEMSTREAM_API_MAX_BODY_BYTES"),
    422: _documented("an invalid request: the message names the fields"),
    429: _documented("the key's tenant is over its share of the process (with Retry-After)"),
    431: _documented("the request's head is over its size or field count (connection closed)"),
    503: _documented(
        "the database or the agent's long-term provider is not reachable, or the process is"
        " over capacity or the search out of time (`overloaded`, with Retry-After)"
    ),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _documented("nothing by that id")}


def _describe(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        # A refusal for load says when to come back.
        headers = {"retry-after": "1"} if exc.status in (429, 503) else None
        return JSONResponse(
            error_body(exc.code, exc.message), status_code=exc.status, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("invalid_request", _describe(exc)), status_code=422)

    @app.exception_handler(ProviderUnavailable)
    async def _provider(_: Request, exc: ProviderUnavailable) -> JSONResponse:
        return JSONResponse(error_body("provider_unavailable", str(exc)), status_code=503)

    @app.exception_handler(SQLAlchemyError)
    async def _database(_: Request, exc: SQLAlchemyError) -> JSONResponse:
        # The record is down: say so plainly; the load path itself degrades instead.
        log.warning("database error: %r", exc)
        if lost_deadlock(exc):
            message = "the call lost a deadlock to concurrent writes; try again shortly"
        else:
            message = "the database is not reachable; try again shortly"
        body = error_body("unavailable", message)
        return JSONResponse(body, status_code=503)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)
