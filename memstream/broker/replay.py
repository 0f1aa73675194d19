"""``memstream replay``: rewinding the worker groups' committed offsets on a topic."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aiokafka import TopicPartition

from memstream.broker.clients import admin_client, make_consumer
from memstream.broker.groups import live_members
from memstream.broker.offsets import target_offsets
from memstream.broker.topics import partitions_of
from memstream.errors import MemstreamError, ReplayRefused
from memstream.roles import ROLES, groups_running, reading_group
from memstream.settings import BrokerSettings
from memstream.topology import role_of_topic


@dataclass(frozen=True)
class Rewind:
    """One partition's committed offset before and after a replay, in one consumer group."""

    partition: int
    before: int | None
    after: int
    group: str = ""


async def replay(settings: BrokerSettings, topic_name: str, to: datetime | None) -> list[Rewind]:
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
    settings: BrokerSettings, group: str, tps: list[TopicPartition], to: datetime | None
) -> list[Rewind]:
    consumer = make_consumer(settings, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(tps)
        targets = await target_offsets(consumer, tps, to)
        before = {tp: await consumer.committed(tp) for tp in tps}
        await consumer.commit(targets)
        return [Rewind(tp.partition, before[tp], targets[tp], group) for tp in tps]
    finally:
        await consumer.stop()
