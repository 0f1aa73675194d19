"""Broker operations outside the stream stages: topic creation, publishing, offset rewinds,
how far the worker group has come."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError

from memstream.errors import MemstreamError, ReplayRefused, ServiceUnavailable
from memstream.longterm.backoff import RetryPolicy, tier_topic
from memstream.roles import ROLES, groups_running, reading_group, role_of_topic
from memstream.settings import Settings

PUBLIC_TOPICS = ("message-written", "session-ended", "dead-letter")
# Between the stages; names and shapes are not public.
STAGE_TOPICS = ("lt-judge", "lt-dedupe", "lt-conflict", "lt-persist", "summary-check")
# Where a dead letter may be sent back to: every topic a stage reads.
REDRIVE_TOPICS = ("message-written", "session-ended", *STAGE_TOPICS)


def internal_topics(settings: Settings) -> tuple[str, ...]:
    """The internal topics: stage to stage, then one per retry tier."""
    tiers = RetryPolicy.from_settings(settings).tiers
    return STAGE_TOPICS + tuple(tier_topic(tier) for tier in range(1, tiers + 1))


@asynccontextmanager
async def admin_client(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.kafka_bootstrap_servers, request_timeout_ms=15000
    )
    try:
        await admin.start()
    except KafkaConnectionError as exc:
        raise ServiceUnavailable(
            f"Kafka at {settings.kafka_bootstrap_servers} does not answer ({exc}); "
            "start it with `make services` or set MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS."
        ) from exc
    try:
        yield admin
    finally:
        await admin.close()


async def ensure_topics(settings: Settings, names: tuple[str, ...] = PUBLIC_TOPICS) -> None:
    """Create the public topics with the configured partition count when missing."""
    async with admin_client(settings) as admin:
        existing = set(await admin.list_topics())
        missing = [settings.topic(n) for n in names if settings.topic(n) not in existing]
        if not missing:
            return
        new = [
            NewTopic(name, settings.topic_partitions, settings.topic_replication_factor)
            for name in missing
        ]
        with contextlib.suppress(TopicAlreadyExistsError):  # another process was first
            await admin.create_topics(new)


@asynccontextmanager
async def producer(settings: Settings, **options: object) -> AsyncIterator[AIOKafkaProducer]:
    """A producer that waits for all in-sync replicas (duplicates are harmless: event ids)."""
    client = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        acks="all",
        linger_ms=5,
        **options,
    )
    try:
        await client.start()
    except KafkaConnectionError as exc:
        raise ServiceUnavailable(
            f"Kafka at {settings.kafka_bootstrap_servers} does not answer ({exc})."
        ) from exc
    try:
        yield client
    finally:
        await client.stop()


async def publish(
    settings: Settings, topic_name: str, values: Iterable[bytes | Mapping[str, Any]]
) -> int:
    """Publish raw values (mappings as JSON), each keyed by its ``conversation_id`` when it has
    one, and wait for every acknowledgement; returns how many were sent."""
    await ensure_topics(settings)
    sent = []
    async with producer(settings) as client:
        for value in values:
            key = None
            if isinstance(value, Mapping):
                conversation = value.get("conversation_id")
                key = None if conversation is None else str(conversation).encode()
                value = orjson.dumps(value)
            sent.append(await client.send(settings.topic(topic_name), value, key=key))
        await asyncio.gather(*sent)
    return len(sent)


async def partitions_of(settings: Settings, topic: str) -> list[int]:
    """Partition ids of a topic (empty when it does not exist)."""
    async with admin_client(settings) as admin:
        (described,) = await admin.describe_topics([topic])
    if described["error_code"] != 0:
        return []
    return sorted(p["partition"] for p in described["partitions"])


async def live_members(settings: Settings, group_id: str) -> list[str]:
    """Member ids of the consumer group right now (empty when no worker runs)."""
    async with admin_client(settings) as admin:
        responses = await admin.describe_consumer_groups([group_id])
    members: list[str] = []
    for response in responses:
        for group in response.groups:
            members += [member[0] for member in group[5]]
    return members


async def caught_up(settings: Settings, topic_name: str) -> bool:
    """Whether the group an all-roles worker reads the topic in has committed every record
    now in it."""
    topic = settings.topic(topic_name)
    group = reading_group(settings.app_id, ROLES, topic_name)
    async with admin_client(settings) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
        if not tps:
            return False
        end: dict[TopicPartition, int] = await consumer.end_offsets(tps)
    finally:
        await stop_consumer(consumer)
    for tp in tps:
        meta = committed.get(tp)
        if end[tp] > 0 and (meta is None or meta.offset < end[tp]):
            return False
    return True


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop a group-less consumer; aiokafka's stop re-raises its own task's cancellation, which
    only matters when this task is being cancelled too."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


@dataclass(frozen=True)
class Rewind:
    """One partition's committed offset before and after a replay, in one consumer group."""

    partition: int
    before: int | None
    after: int
    group: str = ""


async def replay(settings: Settings, topic_name: str, to: datetime | None) -> list[Rewind]:
    """Rewind the worker groups' offsets on ``topic_name`` to the start (None) or a time: the
    group of every worker kind that reads it (memstream.roles) and has committed on it, or the
    group an all-roles worker reads it in when none has; a worker starting later never skips
    what was rewound."""
    topic = settings.topic(topic_name)
    role = role_of_topic(topic_name)
    groups = groups_running(settings.app_id, role) if role else [settings.app_id]
    for group in groups:
        members = await live_members(settings, group)
        if members:
            raise ReplayRefused(
                f"consumer group {group!r} has {len(members)} live member(s); "
                "stop every `memstream worker` first, then replay"
            )
    partitions = await partitions_of(settings, topic)
    if not partitions:
        raise MemstreamError(f"topic {topic!r} does not exist")
    tps = [TopicPartition(topic, p) for p in partitions]
    used = []
    async with admin_client(settings) as admin:
        for group in groups:
            found = await admin.list_consumer_group_offsets(group, partitions=tps)
            if any(meta is not None and meta.offset >= 0 for meta in found.values()):
                used.append(group)
    rewinds: list[Rewind] = []
    for group in used or [reading_group(settings.app_id, ROLES, topic_name)]:
        rewinds += await _rewind(settings, group, tps, to)
    return rewinds


async def _rewind(
    settings: Settings, group: str, tps: list[TopicPartition], to: datetime | None
) -> list[Rewind]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=group,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.assign(tps)
        targets = await _target_offsets(consumer, tps, to)
        before = {tp: await consumer.committed(tp) for tp in tps}
        await consumer.commit(targets)
        return [Rewind(tp.partition, before[tp], targets[tp], group) for tp in tps]
    finally:
        await consumer.stop()


async def _target_offsets(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], to: datetime | None
) -> dict[TopicPartition, int]:
    start: dict[TopicPartition, int] = await consumer.beginning_offsets(tps)
    if to is None:
        return start
    end: dict[TopicPartition, int] = await consumer.end_offsets(tps)
    stamp = int(to.timestamp() * 1000)
    found = await consumer.offsets_for_times(dict.fromkeys(tps, stamp))
    # No record at or after the time: nothing to replay on that partition (its end).
    return {tp: found[tp].offset if found[tp] is not None else end[tp] for tp in tps}


async def records_until_now(
    settings: Settings, topic: str, since: datetime | None = None
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` (full name) from ``since`` (or the start) up to its end at the
    time of the call, partition by partition in offset order; read without a consumer group."""
    partitions = await partitions_of(settings, topic)
    if not partitions:
        return
    tps = [TopicPartition(topic, p) for p in partitions]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign(tps)
        start = await _target_offsets(consumer, tps, since)
        end: dict[TopicPartition, int] = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, start[tp])
        remaining = [tp for tp in tps if start[tp] < end[tp]]
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, records in batch.items():
                for record in records:
                    if record.offset < end[tp]:
                        yield record
            remaining = [tp for tp in remaining if await consumer.position(tp) < end[tp]]
    finally:
        await stop_consumer(consumer)


async def wait_for_broker(settings: Settings, within: float = 30.0) -> None:
    """Wait until the broker answers metadata requests."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            async with admin_client(settings) as admin:
                await admin.list_topics()
                return
        except ServiceUnavailable:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
