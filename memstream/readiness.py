"""Whether the workers consume: for each stage role, a consumer group running it with members
that have their partitions, and how many records of the input topics are not committed yet.

An API that answers is not yet a system that works: until a worker has joined its consumer
group, published events wait in the broker and the load path serves history without them.
``/readyz`` reports this next to its own checks, and requires it with ``?workers=true`` (what
``memstream dev`` waits for before it says "up"). Each role is looked for in every group that
can run it (``memstream.roles``): the history stage in the app id's group, the others in the
Faust group of the worker's roles.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from memstream import offsets
from memstream.kafka import admin_client, stop_consumer
from memstream.roles import ROLES, group_id, groups_running, history_group, role_of_topic
from memstream.settings import Settings

INPUT_TOPICS = ("message-written", "session-ended")
TIMEOUT_SECONDS = 2.0


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


@dataclass(frozen=True, slots=True)
class Workers:
    """The worker groups and their lag; ``error`` when the broker could not say."""

    app_id: str
    groups: list[Group] = field(default_factory=list)
    lag: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def roles(self) -> dict[str, bool]:
        """Per role, whether a group running it consumes."""
        return {role: any(g.consuming for g in self.groups if role in g.roles) for role in ROLES}

    @property
    def consuming(self) -> bool:
        return self.error is None and all(self.roles.values())

    def check(self) -> str:
        """``ok``, or ``error: <why>`` as the other readiness checks say it."""
        if self.consuming:
            return "ok"
        if self.error is not None:
            return f"error: {self.error}"
        missing = [role for role, ok in self.roles.items() if not ok]
        joining = [g.group for g in self.groups if g.members and not g.consuming]
        why = f"no worker consumes the stage role(s) {', '.join(missing)}"
        if joining:
            why += f" (group {', '.join(joining)} is still joining)"
        return f"error: {why}"

    def as_json(self) -> dict[str, Any]:
        return {
            "consuming": self.consuming,
            "roles": self.roles,
            "groups": [_shown(g) for g in self.groups if g.members or g.group == self.app_id],
            "lag": self.lag,
        }


def _shown(group: Group) -> dict[str, Any]:
    return {
        "group": group.group,
        "roles": list(group.roles),
        "state": group.state,
        "members": len(group.members),
    }


async def workers(settings: Settings, within: float = TIMEOUT_SECONDS) -> Workers:
    """The worker groups and their lag on the input topics, in ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            return await _describe(settings)
    except Exception as exc:
        return Workers(settings.app_id, error=exc.__class__.__name__)


async def committed_by_role(
    admin: AIOKafkaAdminClient, app_id: str, topic: str, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Per partition of ``topic`` (without prefix), how far the groups that can run its role
    have committed: the furthest, since one kind of worker runs a role at a time."""
    role = role_of_topic(topic)
    groups = groups_running(app_id, role) if role is not None else [app_id]
    found = await asyncio.gather(*(offsets.committed(admin, g, tps) for g in groups))
    return {tp: max(done[tp] for done in found) for tp in tps}


async def _describe(settings: Settings) -> Workers:
    consumer = offsets.group_less_consumer(settings.kafka_bootstrap_servers)
    async with admin_client(settings) as admin:
        groups = await describe_groups(admin, settings.app_id)
        by_topic = {t: await offsets.partitions(admin, settings.topic(t)) for t in INPUT_TOPICS}
        await consumer.start()
        try:
            every = [tp for tps in by_topic.values() for tp in tps]
            ends = await offsets.high_watermarks(consumer, every)
        finally:
            await stop_consumer(consumer)
        lag = {}
        for topic, tps in by_topic.items():
            done = await committed_by_role(admin, settings.app_id, topic, tps)
            lag[topic] = sum(max(0, ends[tp] - done[tp]) for tp in tps)
    return Workers(settings.app_id, groups, lag)
