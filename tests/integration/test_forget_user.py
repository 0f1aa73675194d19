"""Forgetting a user reaches every provider the tenant has used, removes the content from the
built-in store, and on request purges the user's messages, summaries and cached copies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.marks import MarkStore, mark_of
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.schema import (
    conversation_message,
    conversation_summary,
    long_term_memory,
    memory_embedding,
    processed_mark,
    provider_memory,
)
from tests.fakes.mem0 import Mem0State
from tests.fakes.memos import MemOSState
from tests.support.api import client_for
from tests.support.settings import isolated_settings

pytestmark = pytest.mark.integration


async def configure(api: httpx.AsyncClient, tenant: str, agent: str, provider: str) -> None:
    answer = await api.put(
        f"/v1/agents/{agent}/config",
        params={"tenant_id": tenant},
        json={"long_memory_provider": provider, "model_target_id": "model-1"},
    )
    assert answer.status_code == 200, answer.text


async def remember(api: httpx.AsyncClient, tenant: str, user: str, agent: str, text: str) -> str:
    added = await api.post(
        "/v1/memories",
        json={
            "tenant_id": tenant,
            "user_id": user,
            "agent_id": agent,
            "cube_id": "user_profile",
            "memory_type": "text_mem",
            "content": text,
        },
    )
    assert added.status_code == 201, added.text
    return str(added.json()["id"])


async def rows(engine: AsyncEngine, table: Any, tenant: str, **where: str) -> int:
    query = select(func.count()).select_from(table).where(table.c.tenant_id == tenant)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def test_forgetting_reaches_a_provider_an_agent_has_left_and_erases_the_text(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str, engine: AsyncEngine
) -> None:
    settings, memos, mem0 = servers
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEM0")
        in_mem0 = await remember(api, tenant, "u1", "a1", "The user keeps bees")
        await remember(api, tenant, "u2", "a1", "The user keeps goats")
        # The agent moves to the built-in store; what it wrote to Mem0 stays there.
        await configure(api, tenant, "a1", "MYSQL")
        kept = await remember(api, tenant, "u1", "a1", "The user plays the cello")
        expired = await remember(api, tenant, "u1", "a1", "The user plays the oboe")
        assert (await api.delete(f"/v1/memories/{expired}", params={"tenant_id": tenant})).json()

        forgot = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert forgot.status_code == 200, forgot.text
        assert sorted(forgot.json()["deleted"]) == sorted([in_mem0, kept])

    assert in_mem0 not in mem0.memories
    assert [m["memory"] for m in mem0.memories.values()] == ["The user keeps goats"]
    # No text of the user's is left: not the live memory, not the one expired before, not the
    # ledger's copy of what went to Mem0; the other user's stays.
    assert await rows(engine, long_term_memory, tenant, user_id="u1") == 0
    assert await rows(engine, memory_embedding, tenant, user_id="u1") == 0
    assert await rows(engine, provider_memory, tenant, user_id="u1") == 0
    assert await rows(engine, provider_memory, tenant, user_id="u2") == 1
    assert not memos.requests


async def texts(
    engine: AsyncEngine, table: Any, tenant: str, key: Any, memory_id: str
) -> list[Any]:
    """(content, deleted) of the rows of ``table`` under ``memory_id``."""
    query = select(table.c.content, table.c.deleted_at.is_not(None)).where(
        table.c.tenant_id == tenant, key == memory_id
    )
    async with engine.connect() as conn:
        return [tuple(row) for row in (await conn.execute(query)).all()]


async def test_deleting_one_memory_reaches_every_provider_the_tenant_has_written_to(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str, engine: AsyncEngine
) -> None:
    settings, memos, mem0 = servers
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        in_memos = await remember(api, tenant, "u1", "a1", "The user keeps bees")
        await configure(api, tenant, "a1", "MEM0")
        in_mem0 = await remember(api, tenant, "u1", "a1", "The user keeps goats")
        # Every agent on the built-in store now: what went to MemOS and Mem0 stays there.
        await configure(api, tenant, "a1", "MYSQL")
        builtin = await remember(api, tenant, "u1", "a1", "The user plays the cello")
        for memory_id in (in_memos, in_mem0, builtin):
            answer = await api.delete(f"/v1/memories/{memory_id}", params={"tenant_id": tenant})
            assert answer.status_code == 200, answer.text
            assert answer.json()["deleted"] == [memory_id]
            again = await api.delete(f"/v1/memories/{memory_id}", params={"tenant_id": tenant})
            assert again.status_code == 404
        listed = await api.get("/v1/memories", params={"tenant_id": tenant, "user_id": "u1"})
        assert listed.json()["items"] == []

    assert in_memos not in memos.memories and in_mem0 not in mem0.memories
    # The tombstones stay, without the words.
    ledger = provider_memory.c.memory_id
    assert await texts(engine, provider_memory, tenant, ledger, in_memos) == [("", True)]
    assert await texts(engine, provider_memory, tenant, ledger, in_mem0) == [("", True)]
    own = long_term_memory.c.id
    assert await texts(engine, long_term_memory, tenant, own, builtin) == [("", True)]


def said(tenant: str, user: str, conversation: str, n: int, text: str) -> StoredMessage:
    return StoredMessage(
        tenant, conversation, f"{conversation}-{n}", user, "a1", "user", "chat", text, 5,
        datetime(2026, 1, 1, 0, 0, n), conversation,
    )  # fmt: skip


async def test_the_history_purge_removes_messages_summaries_marks_and_cached_copies(
    services: Settings, tenant: str, engine: AsyncEngine, redis_client: aioredis.Redis
) -> None:
    settings = isolated_settings()
    mine = [said(tenant, "u1", "c1", n, f"My secret number {n}") for n in range(3)]
    theirs = [said(tenant, "u2", "c2", 0, "Not the same person")]
    await MessageStore(engine).insert_many(mine + theirs)
    async with engine.begin() as conn:
        for conversation in ("c1", "c2"):
            await conn.execute(
                insert(conversation_summary).values(
                    tenant_id=tenant,
                    conversation_id=conversation,
                    summary=f"summary of {conversation}",
                    token_count=3,
                    covered_messages=1,
                    updated_at=datetime(2026, 1, 1),
                )
            )
    await MarkStore(engine).record(tenant, "c1", [mark_of("user", "My secret number 0")])
    cache = RedisCache(redis_client, prefix=settings.cache_prefix)
    await cache.warm({(tenant, "c1"): mine, (tenant, "c2"): theirs})
    for conversation in ("c1", "c2"):
        await cache.cache_summary(tenant, conversation, f"summary of {conversation}", 3, 3600)

    async with client_for(settings) as api:
        kept = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert kept.status_code == 200, kept.text
        # Without the option, forgetting leaves the history alone.
        assert await rows(engine, conversation_message, tenant, user_id="u1") == 3
        purged = await api.delete(
            "/v1/users/u1/memories", params={"tenant_id": tenant, "purge_history": "true"}
        )
        assert purged.status_code == 200, purged.text

    assert await rows(engine, conversation_message, tenant, user_id="u1") == 0
    assert await rows(engine, conversation_summary, tenant, conversation_id="c1") == 0
    assert await rows(engine, processed_mark, tenant, conversation_id="c1") == 0
    assert await cache.recent(tenant, "c1", 10) is None
    assert await cache.cached_summary(tenant, "c1") is None
    # The other user's conversation is untouched.
    assert await rows(engine, conversation_message, tenant, user_id="u2") == 1
    assert await rows(engine, conversation_summary, tenant, conversation_id="c2") == 1
    assert [m.event_id for m in await cache.recent(tenant, "c2", 10) or []] == ["c2-0"]
    assert await cache.cached_summary(tenant, "c2") is not None


async def test_a_provider_out_of_reach_fails_the_call_after_the_rest_is_forgotten(
    services: Settings, tenant: str, engine: AsyncEngine
) -> None:
    settings = isolated_settings(agent_config_cache_seconds=0)  # no MemOS URL here
    async with client_for(settings) as api:
        await configure(api, tenant, "a1", "MEMOS")
        await configure(api, tenant, "a2", "MYSQL")
        await remember(api, tenant, "u1", "a2", "The user keeps bees")
        answer = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "provider_unavailable"
        assert "MEMOS" in answer.json()["error"]["message"]
    assert await rows(engine, long_term_memory, tenant, user_id="u1") == 0
