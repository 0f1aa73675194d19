"""Consumer groups: which groups workers can be in, who is in them, and how far they have
committed (``memstream.roles`` names the groups)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from memstream.broker import offsets
from memstream.broker.clients import admin_client, make_consumer, stop_consumer
from memstream.broker.topics import partitions_of
from memstream.roles import ROLES, group_id, groups_running, history_group, reading_group
from memstream.settings import BrokerSettings
from memstream.topology import role_of_topic


@dataclass(frozen=True, slots=True)
class Group:
    """One consumer group of workers as the broker describes it."""

    group: str
    roles: tuple[str, ...]
    state: str = "unknown"
    members: tuple[str, ...] = ()  # the hosts the broker saw them connect from

    @property
    def consuming(self) -> bool:
        return bool(self.members) and self.state == "Stable"


def candidate_groups(app_id: str) -> dict[str, tuple[str, ...]]:
    """Every group a worker can be in, with the roles it runs there: the history stage's
    group first, then the Faust groups of the summary and long-term stages."""
    later = ("summary", "longterm")
    return {
        history_group(app_id): ("history",),
        group_id(app_id, later): later,
        **{group_id(app_id, (role,)): (role,) for role in later},
    }


async def describe_groups(admin: AIOKafkaAdminClient, app_id: str) -> list[Group]:
    """Every group of workers there can be, described; the ones with no member too."""
    candidates = candidate_groups(app_id)
    # One group a request: aiokafka cannot read the answer about three or more at once.
    answers = await asyncio.gather(*(admin.describe_consumer_groups([name]) for name in candidates))
    # Each group: (error_code, group, state, protocol_type, protocol, members); each member:
    # (member_id, client_id, client_host, metadata, assignment); Kafka writes "/10.0.0.5".
    found = {str(g[1]): g for (response,) in answers for g in response.groups}
    groups = []
    for name, roles in candidates.items():
        described = found.get(name)
        if described is None:
            groups.append(Group(name, roles))
            continue
        hosts = tuple(str(m[2]).lstrip("/") or "127.0.0.1" for m in described[5])
        groups.append(Group(name, roles, str(described[2]), hosts))
    return groups


async def live_members(settings: BrokerSettings, group_id: str) -> list[str]:
    """Member ids of the consumer group right now (empty when no worker runs)."""
    async with admin_client(settings) as admin:
        responses = await admin.describe_consumer_groups([group_id])
    members: list[str] = []
    for response in responses:
        for group in response.groups:
            members += [member[0] for member in group[5]]
    return members


async def committed_by_role(
    admin: AIOKafkaAdminClient, app_id: str, topic: str, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Per partition of ``topic`` (without prefix), how far the groups that can run its role
    have committed: the furthest, since one kind of worker runs a role at a time."""
    role = role_of_topic(topic)
    groups = groups_running(app_id, role) if role is not None else [app_id]
    found = await asyncio.gather(*(offsets.committed(admin, g, tps) for g in groups))
    return {tp: max(done[tp] for done in found) for tp in tps}


async def caught_up(settings: BrokerSettings, topic_name: str) -> bool:
    """Whether the group an all-roles worker reads the topic in has committed every record
    now in it."""
    topic = settings.topic(topic_name)
    group = reading_group(settings.app_id, ROLES, topic_name)
    async with admin_client(settings) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    consumer = make_consumer(settings)
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
