"""The hot cache on a Redis Cluster of three masters: history writes, load path reads,
summaries, rebuilds and forget purges on the shared cluster (``make services``), and the load
path answering from the record while a master of a cluster of the test's own is down."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from redis.asyncio.cluster import RedisCluster
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import publish
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.rebuilds import CacheRebuilds
from memstream.text.tokens import count_tokens
from tests.support.api import client_for
from tests.support.kafka import message
from tests.support.messages import alternating
from tests.support.messages import chat as api_chat
from tests.support.redis_cluster import start_cluster
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

CLUSTER_URL = os.environ.get("MEMSTREAM_TEST_REDIS_CLUSTER_URL", "redis://127.0.0.1:7000/0")


@pytest.fixture(scope="module")
async def cluster_url(services: Settings) -> str:
    client = RedisCluster.from_url(CLUSTER_URL)
    try:
        await client.ping()
    except Exception as exc:
        pytest.fail(
            f"the Redis Cluster {CLUSTER_URL} is not reachable: {exc}; start it with "
            "`make services` (or set MEMSTREAM_TEST_REDIS_CLUSTER_URL)"
        )
    finally:
        await client.aclose()
    return CLUSTER_URL


@pytest.fixture
def cluster_settings(cluster_url: str) -> Settings:
    return isolated_settings(redis_url=cluster_url, redis_cluster=True)


@pytest.fixture
async def cache(cluster_settings: Settings) -> AsyncIterator[RedisCache]:
    cache = RedisCache.from_url(
        cluster_settings.redis_url, cluster=True, prefix=cluster_settings.cache_prefix
    )
    yield cache
    await cache.close()


def chat(tenant: str, conversation: str, n: int, *, user: str = "u1") -> list[StoredMessage]:
    return [replace(m, user_id=user) for m in api_chat(tenant, conversation, alternating(n))]


def master_of(cache: RedisCache, tenant: str, conversation: str) -> int:
    client = cache.client
    assert isinstance(client, RedisCluster)
    return int(client.get_node_from_key(cache.key(tenant, conversation)).port)


async def spread(cache: RedisCache, tenant: str, at_least: int = 6) -> list[str]:
    """Conversation ids of ``tenant`` whose keys sit on every master, ``at_least`` of them."""
    await cache.ready()
    conversations: list[str] = []
    masters: set[int] = set()
    while len(masters) < 3 or len(conversations) < at_least:
        conversation = f"c{len(conversations)}"
        conversations.append(conversation)
        masters.add(master_of(cache, tenant, conversation))
    return conversations


async def test_the_history_stage_warms_and_appends_on_every_master(
    cluster_settings: Settings, tenant: str, store: MessageStore, cache: RedisCache, start_worker
) -> None:
    conversations = await spread(cache, tenant, 8)
    first = [message(tenant, c, n) for c in conversations for n in range(5)]
    await publish(cluster_settings, "message-written", first)
    start_worker(cluster_settings)

    async def cached(count: int) -> bool:
        for c in conversations:
            got = await cache.recent(tenant, c, 100)
            if got is None or len(got) != count:
                return False
        return True

    await eventually(lambda: cached(5), within=60, what="every conversation warmed")
    # Keys that exist now take the appends (the script, once per conversation).
    await publish(
        cluster_settings,
        "message-written",
        [message(tenant, c, n) for c in conversations for n in range(5, 8)],
    )
    await eventually(lambda: cached(8), within=60, what="the appends cached")
    got = await cache.recent(tenant, "c3", 2)
    assert [m.content for m in got or []] == [f"message number {n} of c3" for n in (6, 7)]
    assert await store.count(tenant) == 8 * len(conversations)


async def test_the_load_path_reads_turns_and_summary_in_one_call_on_the_cluster(
    cluster_settings: Settings, tenant: str, cache: RedisCache
) -> None:
    # Only the cache holds this conversation and its summary: an answer with them came
    # from the cluster, through the script that reads both keys of one slot.
    await cache.warm({(tenant, "c1"): chat(tenant, "c1", 20)})
    summary = "The user is planning a rail trip across Europe."
    await cache.cache_summary(tenant, "c1", summary, count_tokens(summary), 3600)
    async with client_for(cluster_settings) as api:
        response = await api.post(
            "/v1/context",
            json={
                "tenant_id": tenant, "user_id": "u1", "agent_id": "a1",
                "conversation_id": "c1", "query": "where am I going?", "context_rounds": 2,
            },
        )  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] == []
    first, *turns = body["messages"]
    assert first["summary"] is True and summary in first["content"]
    assert 0 < len(turns) < 20
    assert [m["content"] for m in turns] == [
        f"turn {i} about trains" for i in range(20 - len(turns), 20)
    ]


async def test_forgetting_a_user_purges_their_keys_on_every_master(
    cluster_settings: Settings, tenant: str, store: MessageStore, cache: RedisCache
) -> None:
    mine = await spread(cache, tenant)
    messages = {(tenant, c): chat(tenant, c, 3) for c in mine}
    messages[(tenant, "other")] = chat(tenant, "other", 3, user="u2")
    await store.insert_many([m for ms in messages.values() for m in ms])
    await cache.warm(messages)
    for _, c in messages:
        await cache.cache_summary(tenant, c, f"summary of {c}", 3, 3600)

    async with client_for(cluster_settings) as api:
        answer = await api.delete(
            "/v1/users/u1/memories", params={"tenant_id": tenant, "purge_history": "true"}
        )
    assert answer.status_code == 200, answer.text
    for c in mine:
        assert await cache.recent(tenant, c, 10) is None
        assert await cache.cached_summary(tenant, c) is None
    assert len(await cache.recent(tenant, "other", 10) or []) == 3
    assert await cache.cached_summary(tenant, "other") == ("summary of other", 3)


async def test_marked_conversations_are_dropped_from_every_master(
    tenant: str, engine: AsyncEngine, cache: RedisCache
) -> None:
    conversations = await spread(cache, tenant)
    await cache.warm({(tenant, c): chat(tenant, c, 2) for c in conversations})
    rebuilds = CacheRebuilds(engine)
    await rebuilds.mark([(tenant, c) for c in conversations])
    await cache.drop_stale(rebuilds)
    for c in conversations:
        assert await cache.recent(tenant, c, 10) is None
    assert not [m for m in await rebuilds.marked(10_000) if m[0] == tenant]


async def test_losing_a_master_degrades_to_the_record_without_errors(
    services: Settings, tenant: str, store: MessageStore, tmp_path: Path
) -> None:
    cluster = start_cluster(tmp_path)
    try:
        # A generous time limit: the test is about where answers come from, on a busy machine.
        settings = isolated_settings(
            redis_url=cluster.url, redis_cluster=True, short_term_timeout_seconds=5
        )
        cache = RedisCache.from_url(cluster.url, cluster=True, prefix=settings.cache_prefix)
        conversations = await spread(cache, tenant)
        history = {(tenant, c): chat(tenant, c, 6) for c in conversations}
        await store.insert_many([m for ms in history.values() for m in ms])
        await cache.warm(history)
        port_of = {c: master_of(cache, tenant, c) for c in conversations}
        await cache.close()
        victim = cluster.node_at(port_of["c0"])
        on_victim = [c for c in conversations if port_of[c] == victim.port]
        elsewhere = [c for c in conversations if port_of[c] != victim.port]
        assert elsewhere

        async with client_for(settings) as api:

            async def context(conversation: str) -> tuple[list[str], list[str]]:
                response = await api.post(
                    "/v1/context",
                    json={
                        "tenant_id": tenant, "user_id": "u1", "agent_id": "a1",
                        "conversation_id": conversation, "query": "trains",
                    },
                )  # fmt: skip
                assert response.status_code == 200, response.text
                body = response.json()
                return [m["content"] for m in body["messages"]], body["degraded"]

            assert "cache" not in (await context("c0"))[1]  # the cluster answers while whole
            victim.kill()

            async def every_answer_whole() -> bool:
                for conversation in on_victim + elsewhere:
                    turns, _ = await context(conversation)
                    assert turns == [f"turn {i} about trains" for i in range(6)]
                return True

            # Before the others mark the master failed, and after (node timeout 1 s).
            deadline = time.monotonic() + 30
            while not cluster.marked_failed(victim):
                assert time.monotonic() < deadline, "the master was never marked failed"
                await every_answer_whole()
            await every_answer_whole()
            _, degraded = await context(on_victim[0])
            assert "cache" in degraded
            _, degraded = await context(elsewhere[0])
            assert "cache" not in degraded  # the masters still up keep serving their slots
    finally:
        cluster.stop()
