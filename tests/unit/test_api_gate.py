"""The API's edges without services: the gate in front of the routes, keys, open mode, OpenAPI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memstream.api.app import create_app
from memstream.api.auth import authenticate, check_operator
from memstream.api.gate import Gate
from memstream.errors import ApiError, ConfigurationError
from memstream.settings import Settings

LIMIT = 2048


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"bytes": len(body)})


def gated(keys: dict[str, str] | None = None) -> httpx.AsyncClient:
    app = Starlette(routes=[Route("/v1/echo", echo, methods=["POST"])])
    transport = httpx.ASGITransport(app=Gate(app, max_body_bytes=LIMIT, keys=keys or {}))
    return httpx.AsyncClient(transport=transport, base_url="http://memstream")


async def chunks(total: int, size: int = 512) -> AsyncIterator[bytes]:
    for start in range(0, total, size):
        yield b"x" * min(size, total - start)


async def test_a_body_up_to_the_limit_passes() -> None:
    async with gated() as client:
        response = await client.post("/v1/echo", content=b"x" * LIMIT)
    assert response.status_code == 200 and response.json() == {"bytes": LIMIT}


async def test_an_announced_body_over_the_limit_is_refused_unread() -> None:
    async with gated() as client:
        response = await client.post("/v1/echo", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert response.headers["connection"] == "close"


async def test_a_streamed_body_is_counted_as_it_comes() -> None:
    async with gated() as client:
        within = await client.post("/v1/echo", content=chunks(LIMIT))
        over = await client.post("/v1/echo", content=chunks(LIMIT * 4))
    assert within.status_code == 200 and within.json() == {"bytes": LIMIT}
    assert over.status_code == 413 and over.json()["error"]["code"] == "payload_too_large"


async def test_a_body_is_counted_whatever_its_headers_say() -> None:
    """No Content-Length and a Transfer-Encoding no check would match: still refused at the
    limit, and nothing the app sends afterwards reaches the client."""
    app = Starlette(routes=[Route("/v1/echo", echo, methods=["POST"])])
    gate = Gate(app, max_body_bytes=LIMIT, keys={})
    pieces = [b"x" * 512] * 8
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        body = pieces.pop() if pieces else b""
        return {"type": "http.request", "body": body, "more_body": bool(pieces)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/echo",
        "headers": [(b"transfer-encoding", b"Chunked")],
        "query_string": b"",
    }
    await gate(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 413
    assert len(pieces) == 3  # the rest was never asked for


async def test_a_malformed_length_is_a_bad_request() -> None:
    async with gated() as client:
        response = await client.post("/v1/echo", content=b"{}", headers={"content-length": "two"})
    assert response.status_code == 400


async def test_without_a_valid_key_nothing_of_the_body_is_read() -> None:
    async with gated({"k1": "t1"}) as client:
        anonymous = await client.post("/v1/echo", content=b"x" * (LIMIT * 4))
        wrong = await client.post(
            "/v1/echo", content=b"x", headers={"authorization": "Bearer nope"}
        )
        right = await client.post("/v1/echo", content=b"x", headers={"authorization": "Bearer k1"})
    # 401 before 413: an unknown caller learns nothing and costs nothing.
    assert anonymous.status_code == 401 and wrong.status_code == 401
    assert wrong.json()["error"] == {"code": "unauthorized", "message": "unknown API key"}
    assert right.status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "Bearer clé-secrète",
        "Bearer 密钥",
        "Bearer \udcff",
        "Basic k1",
        "Bearer ",
        "",
        "k1",
    ],
)
def test_keys_that_are_not_valid_are_401_whatever_their_characters(header: str) -> None:
    with pytest.raises(ApiError) as raised:
        authenticate({"k1": "t1", "ключ": "t2"}, header)
    assert raised.value.status == 401


def test_a_valid_key_names_its_tenant() -> None:
    assert authenticate({"k1": "t1", "k2": "t2"}, "Bearer k2") == "t2"
    assert authenticate({"k1": "t1"}, "bearer   k1  ") == "t1"


async def test_non_ascii_bearer_through_the_app_is_401() -> None:
    app = create_app(Settings(api_keys="k1:t1"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        response = await client.get(
            "/v1/conversations/c1/messages?tenant_id=t1",
            headers={"authorization": "Bearer clé".encode()},
        )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "memstream.example.com"])
def test_open_mode_is_refused_off_loopback(host: str) -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_API_KEYS"):
        create_app(Settings(api_host=host, api_keys=""))


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_open_mode_on_loopback_starts(host: str) -> None:
    create_app(Settings(api_host=host, api_keys=""))


def test_open_mode_off_loopback_starts_with_keys_or_when_allowed() -> None:
    create_app(Settings(api_host="0.0.0.0", api_keys="k1:t1"))
    create_app(Settings(api_host="0.0.0.0", api_keys="", api_allow_open=True))


def test_openapi_declares_the_bearer_scheme_errors_and_examples() -> None:
    document = create_app(Settings()).openapi()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "an API key of MEMSTREAM_API_KEYS (none in open mode)",
    }
    context = document["paths"]["/v1/context"]["post"]
    assert context["security"] == [{"bearer": []}]
    for status in ("401", "403", "413", "422", "503"):
        schema = context["responses"][status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, status
    error = document["components"]["schemas"]["ErrorResponse"]
    assert error["examples"][0]["error"]["code"] == "forbidden"
    schemas = document["components"]["schemas"]
    for name in ("ContextRequest", "ContextResponse", "SearchRequest", "AddMemoryRequest"):
        assert schemas[name]["examples"], name
    config = document["paths"]["/v1/agents/{agent_id}/config"]["get"]["responses"]
    assert "404" in config
    # Health and metrics are open whatever the keys.
    assert "security" not in document["paths"]["/healthz"]["get"]


def _asking(settings: Settings, key: str | None) -> Request:
    app = Starlette()
    app.state.settings = settings
    headers = [] if key is None else [(b"authorization", f"Bearer {key}".encode())]
    return Request({"type": "http", "headers": headers, "app": app})


@pytest.mark.parametrize(
    ("keys", "admin", "key", "status"),
    [
        ("", "", None, None),  # open mode: unchanged
        ("kt:tenant", "ka:ops", "ka", None),
        ("kt:tenant", "ka:ops", "kt", 403),
        ("kt:tenant", "", "kt", 403),  # keys but no operator: nobody sees every tenant
        ("kt:tenant", "ka:ops", "other", 401),
        ("kt:tenant", "ka:ops", None, 401),
        ("", "ka:ops", "ka", None),
        ("", "ka:ops", None, 401),
    ],
)
def test_cluster_wide_views_need_an_operator_key(
    keys: str, admin: str, key: str | None, status: int | None
) -> None:
    request = _asking(Settings(api_keys=keys, api_admin_keys=admin), key)
    if status is None:
        check_operator(request)
        return
    with pytest.raises(ApiError) as raised:
        check_operator(request)
    assert raised.value.status == status


def test_admin_keys_are_a_secret_written_as_api_keys_are() -> None:
    settings = Settings(api_admin_keys="op-secret-1:ops, op-secret-2:oncall")
    assert settings.operator_of_key == {"op-secret-1": "ops", "op-secret-2": "oncall"}
    assert "op-secret" not in repr(settings)
    with pytest.raises(ValueError):
        Settings(api_admin_keys="no-name")
