"""Topics: creating them, their partitions, publishing to them, and reading them through."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import IncompatibleBrokerVersion, TopicAlreadyExistsError

from memstream.broker.clients import admin_client, make_consumer, producer, stop_consumer
from memstream.broker.offsets import target_offsets
from memstream.broker.patience import patiently
from memstream.settings import BrokerSettings
from memstream.topology import PUBLIC_TOPICS
from memstream_client.contract.topics import MEMORY_CHANGED

log = logging.getLogger(__name__)


async def ensure_topics(settings: BrokerSettings, names: tuple[str, ...] = PUBLIC_TOPICS) -> None:
    """Create the public topics with the configured partition count when missing, waiting for
    a broker that is not ready yet."""
    await patiently(settings, "creating topics", partial(_ensure_topics, settings, names))


def topic_configs(settings: BrokerSettings, name: str) -> dict[str, str]:
    """The configs memstream sets on a topic (unprefixed ``name``): ``memory-changed`` keeps a
    change for ``MEMSTREAM_CHANGES_RETENTION_HOURS``, the longest a forgotten text may stay.
    It is not compacted: its key is the user, and compaction would keep a user's last change."""
    if name != MEMORY_CHANGED:
        return {}
    return {"retention.ms": str(int(settings.changes_retention_hours * 3600 * 1000))}


async def _ensure_topics(settings: BrokerSettings, names: tuple[str, ...]) -> None:
    async with admin_client(settings) as admin:
        existing = set(await admin.list_topics())
        missing = [n for n in names if settings.topic(n) not in existing]
        for name in names:
            if name not in missing and topic_configs(settings, name):
                await _align_configs(admin, settings.topic(name), topic_configs(settings, name))
        if not missing:
            return
        new = [
            NewTopic(
                settings.topic(name),
                settings.topic_partitions,
                settings.topic_replication_factor,
                topic_configs=topic_configs(settings, name),
            )
            for name in missing
        ]
        with contextlib.suppress(TopicAlreadyExistsError):  # another process was first
            await admin.create_topics(new)


async def _align_configs(admin: AIOKafkaAdminClient, topic: str, wanted: dict[str, str]) -> None:
    """Set ``wanted`` on an existing topic where it differs, keeping its other settings (a
    plain AlterConfigs replaces every setting of the topic that is not a default)."""
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    try:
        (described,) = await admin.describe_configs([resource])
    except IncompatibleBrokerVersion as exc:
        # A broker without topic configs (the bundled one of ``memstream dev``) keeps its own.
        log.warning("cannot set %s on %s: %s", wanted, topic, exc)
        return
    (_, _, _, _, entries) = described.resources[0]
    current = {entry[0]: entry[1] for entry in entries if _set_on_topic(entry)}
    if all(current.get(key) == value for key, value in wanted.items()):
        return
    try:
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={**current, **wanted})]
        )
    except IncompatibleBrokerVersion as exc:
        log.warning("cannot set %s on %s: %s", wanted, topic, exc)


def _set_on_topic(entry: tuple[Any, ...]) -> bool:
    # DescribeConfigs v1+ names each value's source (1: set on the topic); v0 says is_default.
    return entry[3] == 1 if len(entry) >= 6 else not entry[3]


async def partitions(admin: AIOKafkaAdminClient, topic: str) -> list[TopicPartition]:
    """The partitions of ``topic`` (empty when it does not exist)."""
    (described,) = await admin.describe_topics([topic])
    if described["error_code"] != 0:
        return []
    return sorted(TopicPartition(topic, p["partition"]) for p in described["partitions"])


async def partitions_of(settings: BrokerSettings, topic: str) -> list[int]:
    """Partition ids of a topic (empty when it does not exist), waiting for a broker that is
    not ready yet."""

    async def described() -> list[int]:
        async with admin_client(settings) as admin:
            return [tp.partition for tp in await partitions(admin, topic)]

    return await patiently(settings, f"describing {topic}", described)


async def publish(
    settings: BrokerSettings, topic_name: str, values: Iterable[bytes | Mapping[str, Any]]
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


async def records_until_now(
    settings: BrokerSettings, topic: str, since: datetime | None = None
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` (full name) from ``since`` (or the start) up to its end at the
    time of the call, partition by partition in offset order; read without a consumer group."""
    tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
    if not tps:
        return
    opened = partial(_reading, settings, tps, since)
    consumer, start, end = await patiently(settings, f"reading {topic}", opened)
    try:
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


async def _reading(
    settings: BrokerSettings, tps: list[TopicPartition], since: datetime | None
) -> tuple[AIOKafkaConsumer, dict[TopicPartition, int], dict[TopicPartition, int]]:
    """A started consumer positioned at ``since`` on ``tps``, with where each ends now."""
    consumer = make_consumer(settings, enable_auto_commit=False)
    try:
        await consumer.start()
        consumer.assign(tps)
        start = await target_offsets(consumer, tps, since)
        end: dict[TopicPartition, int] = await consumer.end_offsets(tps)
    except BaseException:
        await stop_consumer(consumer)
        raise
    for tp in tps:
        consumer.seek(tp, start[tp])
    return consumer, start, end
