"""Crashes, outages and rebalances: nothing stored twice, nothing lost."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from memstream.broker.groups import caught_up, live_members
from memstream.broker.topics import publish
from memstream.store.cache import RedisCache
from tests.support.faults import proxied_database
from tests.support.kafka import message
from tests.support.processes import worker_metric
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_worker_killed_mid_batch_stores_every_message_once(
    services, tenant, store, redis_client, start_worker
):
    settings = isolated_settings(batch_max_events=500)
    events = [message(tenant, f"c{c}", n) for c in range(50) for n in range(300)]
    await publish(settings, "message-written", events)
    first = start_worker(settings)

    async def partly_stored() -> bool:
        return await store.count(tenant) > 2000

    await eventually(partly_stored, what="the first batches")
    first.kill()  # SIGKILL: no graceful commit, whatever was in flight is redelivered
    assert await store.count(tenant) < len(events), "killed too late to test anything"

    start_worker(settings)
    await eventually(
        lambda: caught_up(settings, "message-written"), within=120, what="all consumed"
    )
    assert await store.count(tenant) == len(events)
    cache = RedisCache(redis_client, prefix=settings.cache_prefix)
    for c in range(0, 50, 7):
        members = await redis_client.zrange(cache.key(tenant, f"c{c}"), 0, -1)
        assert len(members) == 200 and len(set(members)) == 200
        rows = await store.recent(tenant, f"c{c}", 200)
        cached = await cache.recent(tenant, f"c{c}", 200)
        assert cached is not None
        assert [m.event_id for m in cached] == [r.event_id for r in rows]


@pytest.fixture
async def own_redis(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A Redis server of this test's own, so stopping it disturbs nobody else."""
    port = free_port()
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing; `make services` installs it"
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    client = aioredis.Redis(port=port)
    await eventually(lambda: _pings(client), within=10, what="test redis")
    yield port, proc, client
    proc.kill()
    proc.wait()
    await client.aclose()


async def _pings(client: aioredis.Redis) -> bool:
    try:
        return bool(await client.ping())
    except Exception:
        return False


async def test_redis_stopped_mid_stream_loses_nothing(
    services, tenant, store, own_redis, start_worker
):
    port, proc, client = own_redis
    settings = isolated_settings(redis_url=f"redis://127.0.0.1:{port}/0", batch_max_events=100)
    cache = RedisCache(client, prefix=settings.cache_prefix)
    start_worker(settings)
    await publish(settings, "message-written", [message(tenant, "c", n) for n in range(50)])

    async def cached(n: int) -> bool:
        try:
            return await client.zcard(cache.key(tenant, "c")) == n
        except Exception:
            return False

    await eventually(lambda: cached(50), what="first half cached")
    proc.kill()
    proc.wait()
    await publish(settings, "message-written", [message(tenant, "c", n) for n in range(50, 120)])

    async def all_stored() -> bool:
        return await store.count(tenant) == 120

    await eventually(all_stored, what="every message in the record while Redis is down")

    # Redis back (empty, like a restarted cache): the stale conversation is dropped and then
    # rebuilt whole from the record on the next write, never served with a gap.
    proc2 = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    try:
        await eventually(lambda: _pings(client), within=10, what="redis back")
        await publish(settings, "message-written", [message(tenant, "c", 120)])
        await eventually(lambda: cached(121), what="cache rebuilt from the record")
        assert await store.count(tenant) == 121
    finally:
        proc2.kill()
        proc2.wait()


async def _stored_count(port: int) -> float:
    return await worker_metric(port, "memstream_events_total", stage="history", outcome="stored")


async def test_two_workers_share_partitions_and_take_over(services, tenant, store, start_worker):
    settings = isolated_settings(topic_partitions=8)
    a = start_worker(settings, "a")
    b = start_worker(settings.model_copy(update={"worker_web_port": free_port()}), "b")

    async def both_joined() -> bool:
        return len(await live_members(settings, settings.app_id)) == 2

    await eventually(both_joined, within=60, what="both workers in the group")
    # Publish rounds over 40 conversations (all partitions) until both workers have stored
    # some: a rebalance still settling may briefly leave every partition with one of them.
    sent = 0

    async def both_consumed() -> bool:
        nonlocal sent
        if await store.count(tenant) == 40 * sent:  # the last round is stored: one more
            rounds = [message(tenant, f"c{c}", sent + n) for c in range(40) for n in range(5)]
            await publish(settings, "message-written", rounds)
            sent += 5
        a_count = await _stored_count(a.settings.worker_web_port)
        b_count = await _stored_count(b.settings.worker_web_port)
        return a_count > 0 and b_count > 0

    await eventually(both_consumed, within=90, what="both workers storing their partitions")
    await eventually(lambda: caught_up(settings, "message-written"), what="both consumed")
    assert await store.count(tenant) == 40 * sent

    a.stop()  # graceful: b takes over a's partitions
    more = [message(tenant, f"c{c}", sent + n) for c in range(40) for n in range(5)]
    await publish(settings, "message-written", more)
    await eventually(lambda: caught_up(settings, "message-written"), within=90, what="takeover")
    assert await store.count(tenant) == 40 * (sent + 5)
    assert b.alive()


async def test_database_outage_is_waited_out_without_committing(
    services, tenant, store, start_worker
):
    proxy, settings = await proxied_database(services, db_retry_max_seconds=1.0)
    try:
        start_worker(settings)
        await publish(settings, "message-written", [message(tenant, "c", n) for n in range(20)])

        async def first_stored() -> bool:
            return await store.count(tenant) == 20

        await eventually(first_stored, what="messages before the outage")
        await eventually(lambda: caught_up(settings, "message-written"), what="first commit")
        await proxy.stop()
        port = settings.worker_web_port
        tried = await worker_metric(port, "memstream_retries_total", stage="history")
        await publish(settings, "message-written", [message(tenant, "c", n) for n in range(20, 50)])

        async def failing() -> bool:
            # The stage has read the new batch and its writes failed, more than once.
            retries = await worker_metric(port, "memstream_retries_total", stage="history")
            return retries >= tried + 2

        await eventually(failing, what="the batch tried during the outage")
        assert await store.count(tenant) == 20
        assert not await caught_up(settings, "message-written"), "committed during the outage"
        await proxy.start()
        await eventually(lambda: caught_up(settings, "message-written"), what="recovery")
        assert await store.count(tenant) == 50
    finally:
        await proxy.stop()
