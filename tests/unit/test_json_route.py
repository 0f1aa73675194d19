"""``POST /v1/memories/search`` on the load path's route: a JSON body that validates is
answered by its own handler, byte for byte what FastAPI's handling of the same route answers
(which a JSON type the handler leaves, ``application/merge+json``, goes through), and what
does not validate gets FastAPI's 422."""

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
from memstream.api.routes import memories
from memstream.memory import USER_PROFILE, MemoryItem

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

    async def search(self, *args: Any, top_k: int) -> list[MemoryItem]:
        self.asked.append((*args, top_k))
        return [item(1, 0.1 + 0.2), item(2, 1 / 3), item(3, 0.5)]


def client() -> tuple[TestClient, Provider]:
    provider = Provider()

    async def for_agent(tenant_id: str, agent_id: str | None) -> Provider:
        return provider

    app = FastAPI()
    app.state.settings = SimpleNamespace(
        tenant_of_key={}, api_open=True, long_term_timeout_seconds=5.0
    )
    app.state.services = SimpleNamespace(router=SimpleNamespace(for_agent=for_agent))
    errors.install(app)
    app.include_router(memories.router)
    return TestClient(app), provider


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
