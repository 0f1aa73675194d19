"""``POST /v1/memories/search`` on the load path's route: a JSON body that validates is
answered by its own handler, byte for byte what FastAPI's handling of the same route answers
(which a JSON type the handler leaves, ``application/merge+json``, goes through), and what
does not validate gets FastAPI's 422. With ``Lane`` in front, the same answers come without the
router, errors through the app's handlers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memstream.api import errors
from memstream.api.app import create_app
from memstream.api.json_route import JsonBodyRoute, Lane
from memstream.api.routes import memories
from memstream.errors import ProviderUnavailable
from memstream.memory import USER_PROFILE, MemoryItem
from memstream.settings import Settings

SEARCH = {"tenant_id": "acme", "user_id": "u1", "query": "what does the user play?", "top_k": 3}


def item(n: int, score: float) -> MemoryItem:
    return MemoryItem(
        id=f"m{n}",
        tenant_id="acme",
        user_id="u1",
        agent_id=None,
        cube_id=USER_PROFILE,
        memory_type="text_mem",
        content=f'The user plays the cello "{n}" \u00e9t\u00e9 \u6771\u4eac.',
        importance=7,
        source_event_ids=(f"e{n}",),
        created_at=datetime(2026, 1, 2, 3, 4, 5, 600_007, tzinfo=UTC),
        score=score,
        kind="episode" if n % 2 else "fact",
        occurred_at=datetime(2025, 12, 31, tzinfo=UTC) if n % 2 else None,
    )


@dataclass
class Provider:
    asked: list[tuple[Any, ...]] = field(default_factory=list)
    fails: BaseException | None = None

    async def search(self, *args: Any, top_k: int) -> list[MemoryItem]:
        self.asked.append((*args, top_k))
        if self.fails is not None:
            raise self.fails
        return [item(1, 0.1 + 0.2), item(2, 1 / 3), item(3, 0.5)]


def client(*, lane: bool = False, routed: bool = True) -> tuple[TestClient, Provider]:
    provider = Provider()

    async def for_agent(tenant_id: str, agent_id: str | None) -> Provider:
        return provider

    app = FastAPI()
    app.state.settings = SimpleNamespace(
        tenant_of_key={}, api_open=True, long_term_timeout_seconds=5.0
    )
    app.state.services = SimpleNamespace(router=SimpleNamespace(for_agent=for_agent))
    errors.install(app)
    if routed:
        app.include_router(memories.router)
    if lane:
        routes = [r for r in memories.router.routes if isinstance(r, JsonBodyRoute)]
        app.add_middleware(Lane, routes=routes, handlers=app.exception_handlers)
    return TestClient(app, raise_server_exceptions=False), provider


def post(http: TestClient, body: bytes, path: str = "/v1/memories/search") -> Any:
    return http.post(path, content=body, headers={"content-type": "application/json"})


def test_the_handler_answers_what_the_framework_answers() -> None:
    http, provider = client()
    body = orjson.dumps(SEARCH)
    direct = http.post(
        "/v1/memories/search", content=body, headers={"content-type": "application/json"}
    )
    framework = http.post(
        "/v1/memories/search", content=body, headers={"content-type": "application/merge+json"}
    )
    assert direct.status_code == framework.status_code == 200
    assert direct.content == framework.content
    assert direct.headers["content-type"] == framework.headers["content-type"]
    assert [m["id"] for m in direct.json()["items"]] == ["m3", "m2", "m1"]
    assert len(provider.asked) == 2 and provider.asked[0][-1] == 3


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"tenant_id": "acme"', "JSON"),
        (orjson.dumps({**SEARCH, "top_k": 0}), "top_k"),
        (orjson.dumps({**SEARCH, "surprise": 1}), "surprise"),
    ],
)
def test_what_does_not_validate_gets_the_frameworks_422(body: bytes, where: str) -> None:
    http, provider = client()
    answer = http.post(
        "/v1/memories/search", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert where in answer.json()["error"]["message"]
    assert not provider.asked


def test_the_route_is_in_the_schema_with_its_body_and_answer() -> None:
    http, _ = client()
    operation = http.get("/openapi.json").json()["paths"]["/v1/memories/search"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("/SearchRequest") and answer.endswith("/MemoriesResponse")


def test_the_lane_answers_without_the_router() -> None:
    # The route only in the lane, not in the app: a body that validates is answered by the
    # lane, as the routed app answers it; one that does not goes on to the router, a 404 here.
    http, provider = client(lane=True, routed=False)
    plain, _ = client()
    body = orjson.dumps(SEARCH)
    answer, expected = post(http, body), post(plain, body)
    assert (answer.status_code, answer.content) == (200, expected.content)
    assert answer.headers["content-type"] == expected.headers["content-type"]
    assert post(http, orjson.dumps({**SEARCH, "top_k": 0})).status_code == 404
    assert len(provider.asked) == 1


@pytest.mark.parametrize("body", [b'{"tenant_id": "acme"', orjson.dumps({**SEARCH, "surprise": 1})])
def test_through_the_lane_what_does_not_validate_gets_the_frameworks_422(body: bytes) -> None:
    http, provider = client(lane=True)
    plain, _ = client()
    answer = post(http, body)
    assert answer.status_code == 422
    assert answer.content == post(plain, body).content
    assert not provider.asked


@pytest.mark.parametrize(
    ("fails", "status", "code"),
    [
        (ProviderUnavailable("mem0 is down"), 503, "provider_unavailable"),
        (RuntimeError("a bug"), 500, None),
    ],
)
def test_through_the_lane_an_error_is_answered_by_the_apps_handlers(
    fails: Exception, status: int, code: str | None
) -> None:
    http, provider = client(lane=True)
    plain, other = client()
    provider.fails = other.fails = fails
    body = orjson.dumps(SEARCH)
    answer, expected = post(http, body), post(plain, body)
    assert answer.status_code == expected.status_code == status
    assert answer.content == expected.content
    if code is not None:
        assert answer.json()["error"]["code"] == code


def test_the_lane_leaves_other_methods_and_paths_to_the_app() -> None:
    http, provider = client(lane=True)
    plain, _ = client()
    for method, path in [("GET", "/v1/memories/search"), ("POST", "/v1/memories/search/x")]:
        answer = http.request(method, path, content=orjson.dumps(SEARCH))
        expected = plain.request(method, path, content=orjson.dumps(SEARCH))
        assert answer.status_code == expected.status_code and answer.status_code in (404, 405)
        assert answer.content == expected.content
    assert not provider.asked


def test_the_apps_lane_holds_both_load_path_routes() -> None:
    layer: Any = create_app(Settings(api_keys="k1:t1")).build_middleware_stack()
    while not isinstance(layer, Lane):
        layer = layer.app
    assert sorted(layer.routes) == ["/v1/context", "/v1/memories/search"]
