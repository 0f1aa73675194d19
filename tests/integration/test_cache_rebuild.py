"""A cache write that fails leaves no lasting gap: the conversation is marked in the record
before its batch is acknowledged, so whichever writer reaches Redis next, even after a crash,
drops the key and the history is rebuilt whole from the record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.events.deadletter import SourceRecord
from memstream.history import HistoryWriter
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from memstream.store.rebuilds import CacheRebuilds
from memstream.store.schema import cache_rebuild
from tests.support.faults import TcpProxy
from tests.support.kafka import message

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis_proxy(services: Settings) -> AsyncIterator[TcpProxy]:
    """Redis behind a proxy this test can cut: an outage of its own."""
    port = aioredis.Redis.from_url(services.redis_url).connection_pool.connection_kwargs["port"]
    proxy = await TcpProxy(int(port)).start()
    yield proxy
    await proxy.stop()


@pytest.fixture
async def rebuilds(engine: AsyncEngine, tenant: str) -> AsyncIterator[CacheRebuilds]:
    yield CacheRebuilds(engine)
    async with engine.begin() as conn:
        await conn.execute(delete(cache_rebuild).where(cache_rebuild.c.tenant_id == tenant))


def records(tenant: str, *numbers: int) -> list[SourceRecord]:
    """``message-written`` records of conversation c1, in order."""
    return [
        SourceRecord("message-written", 0, n, None, b"c1", orjson.dumps(message(tenant, "c1", n)))
        for n in numbers
    ]


async def no_dead_letters(letters: object) -> None:
    raise AssertionError(f"unexpected dead letters: {letters}")


def writer(store: MessageStore, cache: RedisCache, rebuilds: CacheRebuilds) -> HistoryWriter:
    return HistoryWriter(store, cache, no_dead_letters, rebuilds=rebuilds, max_content_chars=32768)


async def cached(cache: RedisCache, tenant: str) -> list[str]:
    return [m.event_id for m in await cache.recent(tenant, "c1", 50) or []]


async def test_a_failed_cache_write_is_repaired_by_the_next_writer_after_a_crash(
    settings, tenant, store, redis_proxy, rebuilds
):
    through = aioredis.Redis(port=redis_proxy.port, socket_timeout=0.5)
    cache = RedisCache(through, prefix=settings.cache_prefix)
    first = writer(store, cache, rebuilds)
    await first.process(records(tenant, 0, 1))
    assert await cached(cache, tenant) == ["c1-0", "c1-1"]

    await redis_proxy.stop()
    await first.process(records(tenant, 2))  # in the record, not in the cache
    assert [(t, c) for t, c, _ in await rebuilds.marked()] == [(tenant, "c1")]
    # The worker dies here; Redis comes back, and another writer takes the partition over.
    await redis_proxy.start()
    await through.connection_pool.disconnect()
    second = writer(store, cache, rebuilds)
    await second.process(records(tenant, 3))
    assert await cached(cache, tenant) == ["c1-0", "c1-1", "c1-2", "c1-3"]
    assert [m for m in await rebuilds.marked() if m[0] == tenant] == []
    await through.aclose()


@pytest.fixture(params=["mariadb", "sqlite"])
async def marks_in(
    request: pytest.FixtureRequest, engine: AsyncEngine, rebuilds: CacheRebuilds, tmp_path: Path
) -> AsyncIterator[CacheRebuilds]:
    if request.param == "mariadb":
        yield rebuilds
        return
    url = f"sqlite+aiosqlite:///{tmp_path / 'marks.db'}"
    await migrate(url)
    embedded = create_engine(url)
    yield CacheRebuilds(embedded)
    await embedded.dispose()


async def test_a_mark_made_after_it_was_read_is_not_cleared(tenant, marks_in):
    await marks_in.mark([(tenant, "c1"), (tenant, "c2")])
    read = [m for m in await marks_in.marked() if m[0] == tenant]
    # Another batch fails on c1 while the keys read above are being dropped.
    await marks_in.mark([(tenant, "c1")])
    await marks_in.clear(read)
    assert [m for m in await marks_in.marked() if m[0] == tenant] == [(tenant, "c1", 2)]
