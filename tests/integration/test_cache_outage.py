"""A cache that fails costs the load path nothing: with a Redis Cluster master killed, a single
Redis killed, or one that stops answering (SIGSTOP), every ``/v1/context`` answer holds its
newest turn, from the record, within the usual time limits; the history stage's writes go on;
and once the server is back the cache serves again, without the turns it missed."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest
from redis.asyncio.cluster import RedisCluster
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.events.deadletter import SourceRecord
from memstream.history import HistoryWriter
from memstream.runtime import Resources
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore
from memstream.store.rebuilds import CacheRebuilds
from memstream.store.schema import cache_rebuild
from tests.support.api import client_for
from tests.support.kafka import message
from tests.support.redis_cluster import Cluster, Node, start_cluster, start_redis
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

CONVERSATIONS = 60
TURNS = 6  # cached before the outage; turns TURNS and NEWEST are written during it
NEWEST = TURNS + 1  # an assistant turn: the window drops a trailing user turn


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = start_cluster(tmp_path / "cluster")
    yield cluster
    cluster.stop()


@pytest.fixture
def single(tmp_path: Path) -> Iterator[Node]:
    node = start_redis(tmp_path / "redis")
    yield node
    node.stop()


@pytest.fixture
async def rebuilds(engine: AsyncEngine, tenant: str) -> AsyncIterator[CacheRebuilds]:
    yield CacheRebuilds(engine)
    async with engine.begin() as conn:
        await conn.execute(delete(cache_rebuild).where(cache_rebuild.c.tenant_id == tenant))


def records(tenant: str, conversations: list[str], n: int) -> list[SourceRecord]:
    return [
        SourceRecord("message-written", 0, i, None, c.encode(), orjson.dumps(message(tenant, c, n)))
        for i, c in enumerate(conversations)
    ]


async def no_dead_letters(letters: object) -> None:
    raise AssertionError(f"unexpected dead letters: {letters}")


class History:
    """The history stage's writer on a cache built as a worker builds it."""

    def __init__(self, settings: Settings, store: MessageStore, rebuilds: CacheRebuilds) -> None:
        self.resources = Resources.open(settings)
        assert self.resources.cache is not None
        self.cache: RedisCache = self.resources.cache
        self.writer = HistoryWriter(
            store, self.cache, no_dead_letters, rebuilds=rebuilds, max_content_chars=32768
        )

    async def write(self, tenant: str, conversations: list[str], *turns: int) -> None:
        for n in turns:
            await self.writer.process(records(tenant, conversations, n))

    async def close(self) -> None:
        await self.resources.close()


def newest(conversation: str, n: int) -> str:
    return f"message number {n} of {conversation}"


async def answers(api, tenant: str, conversations: list[str]) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    async def one(conversation: str) -> dict:  # type: ignore[type-arg]
        response = await api.post(
            "/v1/context",
            json={
                "tenant_id": tenant, "user_id": "user-1", "agent_id": "agent-1",
                "conversation_id": conversation, "query": "hello",
            },
        )  # fmt: skip
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    return {c: await one(c) for c in conversations}


def troubles(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the logs must not say: a load path out of time, connections left unclosed."""
    gc.collect()  # a client's node dropped with its connections open says so when collected
    said = [record.getMessage() for record in caplog.records]
    return [m for m in said if "ran out of time" in m or "Unclosed" in m]


def lacking(got: dict[str, dict], n: int) -> list[str]:  # type: ignore[type-arg]
    """Conversations whose answer lacks turn ``n`` or ran out of time."""
    return [
        c
        for c, body in got.items()
        if "short_term" in body["degraded"]
        or [m["content"] for m in body["messages"]][-1:] != [newest(c, n)]
    ]


async def test_a_lost_cluster_master_costs_the_load_path_nothing(
    cluster: Cluster,
    tenant: str,
    store: MessageStore,
    rebuilds: CacheRebuilds,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = isolated_settings(redis_url=cluster.url, redis_cluster=True)
    conversations = [f"c{i}" for i in range(CONVERSATIONS)]
    history = History(settings, store, rebuilds)
    try:
        await history.write(tenant, conversations, *range(TURNS))
        client = history.cache.client
        assert isinstance(client, RedisCluster)
        port_of = {c: client.get_node_from_key(history.cache.key(tenant, c)).port
                   for c in conversations}  # fmt: skip
        victim = cluster.node_at(port_of["c0"])
        on_victim = [c for c in conversations if port_of[c] == victim.port]
        async with client_for(settings) as api:
            before = await answers(api, tenant, conversations)
            assert not lacking(before, TURNS - 1)
            assert all("cache" not in body["degraded"] for body in before.values())

            victim.kill()
            await asyncio.wait_for(history.write(tenant, conversations, TURNS, NEWEST), 10)
            got = await answers(api, tenant, conversations)
            assert not lacking(got, NEWEST), f"{len(lacking(got, NEWEST))} of {CONVERSATIONS}"
            for wave in range(0, CONVERSATIONS, 10):  # side by side, ten at a time
                some = conversations[wave : wave + 10]
                together = await asyncio.gather(*(answers(api, tenant, [c]) for c in some))
                assert not lacking({c: a[c] for a in together for c in a}, NEWEST)
            elsewhere = next(c for c in conversations if c not in on_victim)
            assert "cache" not in got[elsewhere]["degraded"]  # the other masters serve

            victim.restart()

            async def served_again() -> bool:
                got = await answers(api, tenant, on_victim)
                assert not lacking(got, NEWEST)
                return all("cache" not in body["degraded"] for body in got.values())

            await eventually(served_again, within=30, what="the master's keys served again")
        assert not troubles(caplog)
        # After the reloads, calls still use the nodes the client keeps (and closes): a slot
        # table of other node objects would leave their connections unclosed.
        manager = client.nodes_manager
        assert all(
            nodes[0] is manager.nodes_cache[nodes[0].name] for nodes in manager.slots_cache.values()
        )
    finally:
        await history.close()


@pytest.mark.parametrize("outage", ["killed", "paused"])
async def test_a_lost_single_redis_costs_the_load_path_nothing(
    single: Node,
    outage: str,
    tenant: str,
    store: MessageStore,
    rebuilds: CacheRebuilds,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = isolated_settings(redis_url=single.url)
    conversations = [f"c{i}" for i in range(CONVERSATIONS)]
    history = History(settings, store, rebuilds)
    try:
        await history.write(tenant, conversations, *range(TURNS))
        async with client_for(settings) as api:
            assert not lacking(await answers(api, tenant, conversations), TURNS - 1)
            single.kill() if outage == "killed" else single.pause()
            await asyncio.wait_for(history.write(tenant, conversations, TURNS, NEWEST), 10)
            got = await answers(api, tenant, conversations)
            assert not lacking(got, NEWEST), f"{len(lacking(got, NEWEST))} of {CONVERSATIONS}"
            assert all("cache" in body["degraded"] for body in got.values())

            single.restart() if outage == "killed" else single.resume()

            async def served_again() -> bool:
                # A paused server kept its keys: they missed turn TURNS, so they must be
                # dropped before the cache serves them again.
                got = await answers(api, tenant, conversations[:10])
                assert not lacking(got, NEWEST)
                return all("cache" not in body["degraded"] for body in got.values())

            await eventually(served_again, within=30, what="the cache served again")
        assert not troubles(caplog)
    finally:
        await history.close()
