"""Whether the workers consume: for each stage role, a consumer group running it with members
that have their partitions, and how many records of the input topics are not committed yet.

An API that answers is not yet a system that works: until a worker has joined its consumer
group, published events wait in the broker and the load path serves history without them.
``/readyz`` reports this next to its own checks, and requires it with ``?workers=true`` (what
``memstream dev`` waits for before it says "up"). Each role is looked for in every group that
can run it (``memstream.roles``, ``memstream.broker.groups``): the history stage in the app
id's group, the others in the Faust group of the worker's roles.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from memstream.broker import offsets
from memstream.broker.clients import admin_client, group_less_consumer, stop_consumer
from memstream.broker.groups import Group, committed_by_role, describe_groups
from memstream.broker.patience import patiently
from memstream.broker.topics import partitions
from memstream.settings import BrokerSettings
from memstream.topology import PUBLIC_TOPICS, ROLES, STAGES

# The topics published into: the lag a platform sees.
INPUT_TOPICS = tuple(stage.input for stage in STAGES if stage.input in PUBLIC_TOPICS)
TIMEOUT_SECONDS = 2.0


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


async def workers(settings: BrokerSettings, within: float = TIMEOUT_SECONDS) -> Workers:
    """The worker groups and their lag on the input topics, in ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            # Half the time to retry a broker that is not ready, so its own error is reported.
            return await patiently(
                settings, "readiness", partial(_describe, settings), within=within / 2
            )
    except Exception as exc:
        return Workers(settings.app_id, error=exc.__class__.__name__)


async def _describe(settings: BrokerSettings) -> Workers:
    consumer = group_less_consumer(settings)
    async with admin_client(settings) as admin:
        groups = await describe_groups(admin, settings.app_id)
        by_topic = {t: await partitions(admin, settings.topic(t)) for t in INPUT_TOPICS}
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
