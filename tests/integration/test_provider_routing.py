"""Provider routing through the query API: an agent configured ``MEMOS`` or ``MEM0`` is served
by that (local, real HTTP) server, a provider that is down or not configured degrades the
long-term part instead of failing the request, and ``MYSQL`` or no config is the built-in
store."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memstream.providers.mem0 import mem0_user
from memstream.providers.memos import memos_cube
from memstream.settings import Settings
from tests.fakes.mem0 import MEM0_KEY, Mem0State
from tests.fakes.memos import MEMOS_KEY, MemOSState
from tests.support.api import client_for
from tests.support.settings import free_port, isolated_settings

pytestmark = pytest.mark.integration


async def configure(api: httpx.AsyncClient, tenant: str, agent: str, provider: str | None) -> None:
    response = await api.put(
        f"/v1/agents/{agent}/config",
        params={"tenant_id": tenant},
        json={"long_memory_provider": provider, "model_target_id": "model-1"},
    )
    assert response.status_code == 200, response.text


def context(tenant: str, agent: str | None, query: str = "green tea") -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": agent,
        "conversation_id": "c1",
        "query": query,
    }


async def test_memos_agent_is_served_by_memos(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str
) -> None:
    settings, memos, mem0 = servers
    profile = memos.seed(memos_cube(tenant, "u1", "user_profile"), "The user loves green tea")
    agent = memos.seed(memos_cube(tenant, "u1", "agent_a1"), "Serve green tea in a glass")
    memos.seed(memos_cube("someone-else", "u1", "user_profile"), "The user loves green tea")
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        response = await api.post("/v1/context", json=context(tenant, "a1"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["degraded"] == []
        long_term = body["long_term"]
        assert long_term["provider"] == "MEMOS"
        assert {i["id"]: i["cube_id"] for i in long_term["items"]} == {
            profile: "user_profile",
            agent: "agent_a1",
        }
        assert "The user loves green tea" in long_term["user_profile"]
        assert "Serve green tea in a glass" in long_term["agent_memory"]
        [search] = memos.calls("/product/search")
        assert search.body["user_id"] == f"{tenant}:u1"
        assert search.body["readable_cube_ids"] == [
            memos_cube(tenant, "u1", "user_profile"),
            memos_cube(tenant, "u1", "agent_a1"),
        ]
        assert search.headers["authorization"] == f"Bearer {MEMOS_KEY}"

        # The memory endpoints go through the agent's provider too.
        listed = (
            await api.get(
                "/v1/memories", params={"tenant_id": tenant, "user_id": "u1", "agent_id": "a1"}
            )
        ).json()
        assert {i["id"] for i in listed["items"]} == {profile, agent}
        added = await api.post(
            "/v1/memories",
            json={
                "tenant_id": tenant,
                "user_id": "u1",
                "agent_id": "a1",
                "cube_id": "user_profile",
                "memory_type": "pref_mem",
                "content": "The user prefers oolong",
                "importance": 6,
            },
        )
        assert added.status_code == 201, added.text
        assert added.json()["id"] in memos.memories
        assert memos.texts(memos_cube(tenant, "u1", "user_profile")) == [
            "The user loves green tea",
            "The user prefers oolong",
        ]

        # Forgetting the user reaches MemOS (the tenant's agents use it).
        forgot = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert forgot.status_code == 200, forgot.text
        assert profile in forgot.json()["deleted"] and agent in forgot.json()["deleted"]
        assert memos.texts(memos_cube(tenant, "u1", "user_profile")) == []
        assert memos.texts(memos_cube("someone-else", "u1", "user_profile")) != []
    assert not mem0.requests


async def test_mem0_agent_is_served_by_mem0(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str
) -> None:
    settings, memos, mem0 = servers
    user = mem0_user(tenant, "u1")
    profile = mem0.seed(user, "The user loves green tea")
    agent = mem0.seed(user, "Serve green tea in a glass", agent_id="a2")
    mem0.seed(mem0_user("someone-else", "u1"), "The user loves green tea")
    async with client_for(settings) as api:
        await configure(api, tenant, "a2", "MEM0")
        response = await api.post("/v1/context", json=context(tenant, "a2"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["degraded"] == []
        assert body["long_term"]["provider"] == "MEM0"
        assert {i["id"]: i["cube_id"] for i in body["long_term"]["items"]} == {
            profile: "user_profile",
            agent: "agent_a2",
        }
        assert all(r.headers["x-api-key"] == MEM0_KEY for r in mem0.requests)

        deleted = await api.delete(f"/v1/memories/{agent}", params={"tenant_id": tenant})
        assert deleted.status_code == 200 and deleted.json()["deleted"] == [agent]
        assert agent not in mem0.memories
    assert not memos.requests


async def test_memos_down_degrades_the_long_term_part(services: Settings, tenant: str) -> None:
    settings = isolated_settings(
        memos_url=f"http://127.0.0.1:{free_port()}", agent_config_cache_seconds=0
    )
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        response = await api.post("/v1/context", json=context(tenant, "a1"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["degraded"] == ["long_term"]
        assert body["long_term"]["provider"] == "MEMOS"
        assert body["long_term"]["items"] == []
        assert body["tokens"]["user_profile"] == 0


async def test_slow_memos_degrades_within_the_budget(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str
) -> None:
    settings, memos, _ = servers
    memos.seed(memos_cube(tenant, "u1", "user_profile"), "The user loves green tea")
    memos.delay["/product/search"] = 3.0
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        response = await api.post("/v1/context", json=context(tenant, "a1"))
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == ["long_term"]


async def test_unconfigured_provider_degrades(services: Settings, tenant: str) -> None:
    settings = isolated_settings(agent_config_cache_seconds=0)  # no MemOS, no Mem0 URL
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        await configure(api, tenant, "a2", "MEM0")
        for agent in ("a1", "a2"):
            body = (await api.post("/v1/context", json=context(tenant, agent))).json()
            assert body["degraded"] == ["long_term"]
        listed = await api.get(
            "/v1/memories", params={"tenant_id": tenant, "user_id": "u1", "agent_id": "a1"}
        )
        assert listed.status_code == 503
        assert "MEMSTREAM_MEMOS_URL" in listed.json()["error"]["message"]


async def test_mysql_and_unset_use_the_builtin_store(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str
) -> None:
    settings, memos, mem0 = servers
    async with client_for(settings) as api:
        await configure(api, tenant, "a3", "MYSQL")
        for agent in ("a3", "unconfigured"):
            added = await api.post(
                "/v1/memories",
                json={
                    "tenant_id": tenant,
                    "user_id": "u1",
                    "agent_id": agent,
                    "cube_id": f"agent_{agent}",
                    "memory_type": "text_mem",
                    "content": f"Agent {agent} serves green tea",
                },
            )
            assert added.status_code == 201, added.text
            body = (await api.post("/v1/context", json=context(tenant, agent))).json()
            assert body["degraded"] == []
            assert body["long_term"]["provider"] == "MYSQL"
            assert [i["content"] for i in body["long_term"]["items"]] == [
                f"Agent {agent} serves green tea"
            ]
        # No agent of this tenant uses an external provider: forgetting stays built-in.
        forgot = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert len(forgot.json()["deleted"]) == 2
    assert not memos.requests and not mem0.requests
