"""``POST /v1/context``'s one route: a JSON body that validates is answered by its own handler,
anything else by FastAPI's handling of the same route, and the tenant is checked once either
way."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream.api import errors
from memstream.api.auth import TENANT
from memstream.api.overload import ARRIVED, LAGGING
from memstream.api.routes import context
from memstream_client.contract.api import ContextRequest, ContextResponse
from tests.support.api import empty_context

VALID = {"tenant_id": "acme", "user_id": "u1", "conversation_id": "c1", "query": "dinner?"}


@dataclass
class LoadPath:
    """Records each request it answers and answers an empty context."""

    asked: list[tuple[ContextRequest, float | None, bool]] = field(default_factory=list)

    async def context(
        self, req: ContextRequest, *, arrived: float | None, with_long_term: bool
    ) -> ContextResponse:
        self.asked.append((req, arrived, with_long_term))
        return empty_context(req.conversation_id)


class Scoped:
    """Stands where the gate and admission stand: puts what they would into the scope."""

    def __init__(self, app: ASGIApp, *, extra: dict[str, Any]) -> None:
        self.app = app
        self.extra = extra

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app({**scope, **self.extra}, receive, send)


def client(keys: dict[str, str] | None = None, **scope: Any) -> tuple[TestClient, LoadPath]:
    app = FastAPI()
    loadpath = LoadPath()
    keys = keys or {}
    app.state.settings = SimpleNamespace(tenant_of_key=keys, api_open=not keys)
    app.state.services = SimpleNamespace(loadpath=loadpath)
    errors.install(app)
    app.include_router(context.router)
    app.add_middleware(Scoped, extra=scope)
    return TestClient(app), loadpath


@pytest.fixture
def framework_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The endpoint FastAPI calls after its own body handling, counted."""
    calls: list[str] = []
    original = context.answer

    async def counted(body: ContextRequest, request: Any, services: Any) -> Any:
        calls.append(body.conversation_id)
        return await original(body, request, services)

    monkeypatch.setattr(context, "answer", counted)
    yield calls


def test_the_route_is_declared_to_the_framework_and_the_schema() -> None:
    http, _ = client()
    document = http.get("/openapi.json").json()
    operation = document["paths"]["/v1/context"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ContextRequest"
    )


def test_a_valid_request_is_answered_with_what_the_scope_says() -> None:
    http, loadpath = client(**{ARRIVED: 12.5, LAGGING: False})
    answer = http.post("/v1/context", json=VALID)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert orjson.loads(answer.content)["conversation_id"] == "c1"
    [(req, arrived, with_long_term)] = loadpath.asked
    assert req == ContextRequest.model_validate(VALID)
    assert (arrived, with_long_term) == (12.5, True)


def test_a_lagging_loop_asks_for_the_short_term_only() -> None:
    http, loadpath = client(**{LAGGING: True})
    assert http.post("/v1/context", json=VALID).status_code == 200
    assert loadpath.asked[0][2] is False


@pytest.mark.parametrize(
    ("body", "content_type", "where"),
    [
        (b'{"tenant_id": "acme"', "application/json", "JSON"),  # not JSON
        (orjson.dumps({**VALID, "context_rounds": -1}), "application/json", "context_rounds"),
        (orjson.dumps({**VALID, "surprise": 1}), "application/json", "surprise"),
        (orjson.dumps(VALID), "text/plain", "body"),  # not read as JSON
    ],
)
def test_what_does_not_validate_gets_the_frameworks_422(
    body: bytes, content_type: str, where: str
) -> None:
    http, loadpath = client()
    answer = http.post("/v1/context", content=body, headers={"content-type": content_type})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert where in answer.json()["error"]["message"]
    assert not loadpath.asked


def test_a_json_type_the_handler_leaves_is_answered_through_the_framework(
    framework_calls: list[str],
) -> None:
    http, loadpath = client()
    headers = {"content-type": "application/merge+json"}
    answer = http.post("/v1/context", content=orjson.dumps(VALID), headers=headers)
    assert answer.status_code == 200 and framework_calls == ["c1"] and len(loadpath.asked) == 1


# With keys, the gate in front puts the key's tenant in the scope, or refuses the request.
@pytest.mark.parametrize("content_type", ["application/json", "application/merge+json"])
def test_another_tenants_key_is_refused_on_both_ways(content_type: str) -> None:
    http, loadpath = client({"key-acme": "acme", "key-other": "other"}, **{TENANT: "other"})
    headers = {"content-type": content_type}
    answer = http.post("/v1/context", content=orjson.dumps(VALID), headers=headers)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
    assert not loadpath.asked


def test_the_tenants_own_key_is_answered() -> None:
    http, loadpath = client({"key-acme": "acme"}, **{TENANT: "acme"})
    assert http.post("/v1/context", json=VALID).status_code == 200
    assert len(loadpath.asked) == 1


def test_other_methods_are_the_frameworks() -> None:
    http, loadpath = client()
    assert http.get("/v1/context").status_code == 405 and not loadpath.asked
