"""The query API on the real database and cache: load path, memories, agents, auth, errors."""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.schema import conversation_summary
from memstream.text.tokens import count_tokens
from tests.support.api import client_for
from tests.support.faults import proxied_database
from tests.support.messages import alternating, chat
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(settings) as client:
        yield client


def context_body(tenant: str, conversation: str = "c1", **extra: Any) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": "a1",
        "conversation_id": conversation,
        "query": "what do I like to drink?",
        **extra,
    }


async def test_context_reads_the_cache_and_only_what_the_window_needs(
    api, settings, tenant, store, redis_client
):
    messages = chat(tenant, "c1", alternating(100))
    await store.insert_many(messages)
    cache = RedisCache(redis_client, prefix=settings.cache_prefix)
    await cache.warm({(tenant, "c1"): messages})

    response = await api.post("/v1/context", json=context_body(tenant, context_rounds=4))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] == []
    assert [m["content"] for m in body["messages"]] == [
        f"turn {i} about trains" for i in range(88, 100)
    ]
    assert body["tokens"]["messages"] == sum(m["tokens"] for m in body["messages"])
    assert body["long_term"]["provider"] == "MYSQL"


async def test_cache_miss_reads_the_record_and_rewarms(api, settings, tenant, store, redis_client):
    await store.insert_many(chat(tenant, "c2", alternating(10)))
    body = (await api.post("/v1/context", json=context_body(tenant, "c2"))).json()
    assert len(body["messages"]) == 10 and body["degraded"] == []
    cache = RedisCache(redis_client, prefix=settings.cache_prefix)

    async def warmed() -> bool:
        return await redis_client.zcard(cache.key(tenant, "c2")) == 10

    await eventually(warmed, within=10, what="cache re-warmed")


async def test_cache_down_reads_the_record_and_says_so(services, tenant, store):
    settings = isolated_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    await store.insert_many(chat(tenant, "c3", alternating(6)))
    async with client_for(settings) as api:
        body = (await api.post("/v1/context", json=context_body(tenant, "c3"))).json()
    assert "cache" in body["degraded"]
    assert len(body["messages"]) == 6


async def test_summary_is_prepended_when_the_window_overflows(api, settings, tenant, store, engine):
    long_text = "word " * 900
    await store.insert_many(chat(tenant, "c4", [("user", long_text), ("assistant", long_text)] * 6))
    summary = "The user is planning a rail trip across Europe."
    async with engine.begin() as conn:
        await conn.execute(
            conversation_summary.insert().values(
                tenant_id=tenant,
                conversation_id="c4",
                summary=summary,
                token_count=count_tokens(summary),
                covered_messages=6,
                updated_at=datetime(2026, 2, 1),
            )
        )
    body = (await api.post("/v1/context", json=context_body(tenant, "c4"))).json()
    first = body["messages"][0]
    assert first["summary"] is True and first["role"] == "system" and summary in first["content"]
    assert body["tokens"]["messages"] <= settings.window_max_tokens


async def test_agent_config_round_trip_and_routing(services, tenant):
    async with client_for(isolated_settings(agent_config_cache_seconds=0)) as api:
        await _routing(api, tenant)


async def _routing(api: httpx.AsyncClient, tenant: str) -> None:
    assert (await api.get(f"/v1/agents/a1/config?tenant_id={tenant}")).status_code == 404
    put = await api.put(
        f"/v1/agents/a1/config?tenant_id={tenant}",
        json={"long_memory_provider": None, "open_long_memory": False, "context_rounds": 2},
    )
    assert put.status_code == 200, put.text
    got = (await api.get(f"/v1/agents/a1/config?tenant_id={tenant}")).json()
    assert got["open_long_memory"] is False and got["context_rounds"] == 2
    await api.post(
        "/v1/memories",
        json={
            "tenant_id": tenant, "user_id": "u1", "agent_id": "a1", "cube_id": "user_profile",
            "memory_type": "pref_mem", "content": "The user likes to drink green tea",
        },
    )  # fmt: skip

    async def context() -> dict[str, Any]:
        return (await api.post("/v1/context", json=context_body(tenant))).json()

    routes: list[tuple[dict[str, Any], str | None, bool, list[str]]] = [
        ({"open_long_memory": False, "model_target_id": "m1"}, None, False, []),
        ({"open_long_memory": True, "model_target_id": None}, None, False, []),
        ({"open_long_memory": True, "model_target_id": "m1"}, "MYSQL", True, []),
        (
            {"open_long_memory": True, "model_target_id": "m1", "long_memory_provider": "MYSQL"},
            "MYSQL",
            True,
            [],
        ),
        (
            {"open_long_memory": True, "model_target_id": "m1", "long_memory_provider": "MEMOS"},
            "MEMOS",
            False,
            ["long_term"],
        ),
    ]
    for config, provider, has_items, degraded in routes:
        await api.put(f"/v1/agents/a1/config?tenant_id={tenant}", json=config)
        body = await context()
        assert body["long_term"]["provider"] == provider, config
        assert bool(body["long_term"]["items"]) is has_items, config
        assert body["degraded"] == degraded, config
    # An agent without a configuration uses the built-in store.
    unknown = (await api.post("/v1/context", json=context_body(tenant, agent_id="nobody"))).json()
    assert unknown["long_term"]["provider"] == "MYSQL"


async def test_memories_add_list_search_delete_and_forget(api, tenant):
    def add(content: str, cube: str = "user_profile") -> dict[str, Any]:
        return {
            "tenant_id": tenant, "user_id": "u1", "agent_id": "a1", "cube_id": cube,
            "memory_type": "text_mem", "content": content, "importance": 6,
        }  # fmt: skip

    first = await api.post("/v1/memories", json=add("The user lives in Berlin"))
    assert first.status_code == 201, first.text
    again = await api.post("/v1/memories", json=add("The user lives in Berlin"))
    assert again.json()["id"] == first.json()["id"]
    await api.post("/v1/memories", json=add("Prefers trains to planes", "agent_a1"))
    bad_cube = await api.post("/v1/memories", json=add("x", "agent_other"))
    assert bad_cube.status_code == 422

    listed = (await api.get(f"/v1/memories?tenant_id={tenant}&user_id=u1&agent_id=a1")).json()
    assert len(listed["items"]) == 2
    query = {"tenant_id": tenant, "user_id": "u1", "agent_id": "a1", "top_k": 5}
    search = await api.post(
        "/v1/memories/search", json={**query, "query": "where does the user live"}
    )
    items = search.json()["items"]
    assert items and "Berlin" in items[0]["content"]
    assert all(0 <= i["score"] <= 1 for i in items)
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)

    gone = await api.delete(f"/v1/memories/{first.json()['id']}?tenant_id={tenant}")
    assert gone.json() == {"deleted": [first.json()["id"]]}
    assert (
        await api.delete(f"/v1/memories/{first.json()['id']}?tenant_id={tenant}")
    ).status_code == 404
    forgot = await api.delete(f"/v1/users/u1/memories?tenant_id={tenant}")
    assert len(forgot.json()["deleted"]) == 1
    listed = (await api.get(f"/v1/memories?tenant_id={tenant}&user_id=u1&agent_id=a1")).json()
    assert listed["items"] == []


async def test_api_keys_bind_tenants(services, tenant, store):
    other = tenant + "-other"
    settings = isolated_settings(api_keys=f"k1:{tenant},k2:{other}")
    await store.insert_many(chat(tenant, "c9", alternating(2)))
    async with client_for(settings) as api:
        url = f"/v1/conversations/c9/messages?tenant_id={tenant}"
        assert (await api.get(url)).status_code == 401
        assert (await api.get(url, headers={"Authorization": "Bearer nope"})).status_code == 401
        denied = await api.get(url, headers={"Authorization": "Bearer k2"})
        assert denied.status_code == 403
        assert denied.json()["error"]["code"] == "forbidden"
        ok = await api.get(url, headers={"Authorization": "Bearer k1"})
        assert ok.status_code == 200 and len(ok.json()["messages"]) == 2
        cross = await api.post(
            "/v1/context", json=context_body(tenant, "c9"), headers={"Authorization": "Bearer k2"}
        )
        assert cross.status_code == 403
        assert (await api.get("/healthz")).status_code == 200


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("POST", "/v1/context", {"tenant_id": "t"}),
        ("POST", "/v1/context", {**context_body("t"), "tenant_id": "x" * 129}),
        ("POST", "/v1/context", {**context_body("t"), "context_rounds": -1}),
        ("POST", "/v1/context", {**context_body("t"), "surprise": 1}),
        (
            "POST",
            "/v1/memories/search",
            {"tenant_id": "t", "user_id": "u", "query": "", "top_k": 3},
        ),
        ("GET", "/v1/conversations/c/messages", None),
        ("GET", "/v1/conversations/c/messages?tenant_id=t&limit=0", None),
        ("PUT", "/v1/agents/a/config?tenant_id=t", {"long_memory_provider": "REDIS"}),
        ("GET", "/v1/nowhere", None),
    ],
)
async def test_bad_requests_get_a_4xx_with_a_message(api, method, url, body):
    response = await api.request(method, url, json=body)
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["code"] and error["message"]


async def test_database_down_degrades_the_load_path(services, tenant, store, redis_client):
    # A refused database fails at once; the limits are long so that a stall of the test
    # process's loop (a long collection late in the suite) cannot pass for the outage.
    proxy, settings = await proxied_database(
        services, short_term_timeout_seconds=5.0, long_term_timeout_seconds=5.0
    )
    messages = chat(tenant, "c5", alternating(4))
    await store.insert_many(messages)
    await RedisCache(redis_client, prefix=settings.cache_prefix).warm({(tenant, "c5"): messages})
    try:
        async with client_for(settings) as api:
            await proxy.stop()
            response = await api.post("/v1/context", json=context_body(tenant, "c5", agent_id=None))
            assert response.status_code == 200
            body = response.json()
            assert len(body["messages"]) == 4  # from the cache
            assert "long_term" in body["degraded"]
            history = await api.get(f"/v1/conversations/c5/messages?tenant_id={tenant}")
            assert history.status_code == 503
            assert history.json()["error"]["code"] == "unavailable"
            ready = await api.get("/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["database"] != "ok"
    finally:
        await proxy.stop()


async def test_a_started_app_did_its_one_time_work_before_its_first_request(settings):
    # FastAPI builds the routes at the first request matched against them, 0.1 s of CPU on
    # the loop; startup does it now, and collects then freezes the heap the imports made.
    async with client_for(settings) as api:
        assert gc.get_freeze_count() > 0
        costs = []
        gc.disable()  # a collection of this test process's own heap is none of the app's
        try:
            for _ in range(3):
                started = time.thread_time()
                response = await api.get("/healthz")
                costs.append(time.thread_time() - started)
                assert response.status_code == 200
        finally:
            gc.enable()
    assert costs[0] < min(costs[1:]) + 0.03, costs


async def test_readyz_and_metrics(api):
    ready = await api.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"database": "ok", "cache": "ok", "broker": "ok"}
    await api.post("/v1/context", json=context_body("metrics-tenant"))
    text = (await api.get("/metrics")).text
    assert 'memstream_load_path_seconds_count{path="total"}' in text
    assert (await api.get("/openapi.json")).json()["paths"]["/v1/context"]
