"""Kafka as the tests see it: the events they publish, every record a topic holds and how far
a consumer group has got through them."""

from __future__ import annotations

from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.broker import offsets
from memstream.broker.clients import admin_client, group_less_consumer, stop_consumer
from memstream.broker.groups import caught_up
from memstream.broker.topics import partitions, partitions_of
from memstream.roles import ROLES, group_id
from memstream.settings import Settings


async def read_topic(settings: Settings, topic_name: str) -> list[tuple[bytes | None, Any]]:
    """Every record now in a topic, as (key, decoded JSON value)."""
    topic = settings.topic(topic_name)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[tuple[bytes | None, Any]] = []
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            batch = await consumer.getmany(*tps, timeout_ms=500)
            for records in batch.values():
                out += [(r.key, orjson.loads(r.value)) for r in records]
        return out
    finally:
        await stop_consumer(consumer)


async def committed_to_end(settings: Settings, topic_name: str, group: str) -> bool:
    """Whether ``group`` has committed every record now in the topic: the stage reading it has
    settled them all (what a test waits on before asserting that nothing more happens)."""
    topic = settings.topic(topic_name)
    async with admin_client(settings) as admin:
        tps = await partitions(admin, topic)
        done = await offsets.committed(admin, group, tps)
    consumer = group_less_consumer(settings)
    await consumer.start()
    try:
        ends: dict[TopicPartition, int] = await consumer.end_offsets(tps) if tps else {}
    finally:
        await stop_consumer(consumer)
    return all(done[tp] >= ends[tp] for tp in tps)


def retry_group(settings: Settings) -> str:
    """The group in which an all-roles worker's retry stage reads the retry tiers."""
    return f"{group_id(settings.app_id, ROLES)}.retry"


def session_end(tenant: str, conversation: str, **fields: Any) -> dict[str, Any]:
    """A valid session-ended event of ``conversation``."""
    event = {
        "event_id": f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "conversation_id": conversation,
    }
    event.update(fields)
    return event


def message(tenant: str, conversation: str, n: int, **fields: Any) -> dict[str, Any]:
    """A valid message-written event."""
    event = {
        "event_id": f"{conversation}-{n}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "conversation_id": conversation,
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"message number {n} of {conversation}",
        "created_at": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}.{n:06d}Z",
    }
    event.update(fields)
    return event


LONG_TERM_CHAIN = ("session-ended", "lt-judge", "lt-dedupe", "lt-conflict", "lt-persist")


async def chain_idle(settings: Settings) -> bool:
    """Whether the long-term chain's group has committed every record of each of its topics."""
    for topic in LONG_TERM_CHAIN:
        if not await caught_up(settings, topic):
            return False
    return True
