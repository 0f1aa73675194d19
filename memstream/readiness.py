"""Whether the workers consume: the worker group's state and members, and how many records of
the input topics it has not committed yet (its lag).

An API that answers is not yet a system that works: until a worker has joined its consumer
group, published events wait in the broker and the load path serves history without them.
``/readyz`` reports this next to its own checks, and requires it with ``?workers=true`` (what
``memstream dev`` waits for before it says "up").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from memstream import offsets
from memstream.kafka import admin_client, stop_consumer
from memstream.settings import Settings

INPUT_TOPICS = ("message-written", "session-ended")
TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class WorkerGroup:
    """The worker group as the broker describes it; ``error`` when the broker could not say."""

    group: str
    state: str = "unknown"
    members: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def consuming(self) -> bool:
        """Members have joined and been given their partitions."""
        return self.error is None and self.members > 0 and self.state == "Stable"

    def check(self) -> str:
        """``ok``, or ``error: <why>`` as the other readiness checks say it."""
        if self.consuming:
            return "ok"
        if self.error is not None:
            return f"error: {self.error}"
        if self.members == 0:
            return f"error: no worker is in consumer group {self.group!r}"
        return f"error: consumer group {self.group!r} is in state {self.state}, not consuming yet"

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "consuming": self.consuming,
            "state": self.state,
            "members": self.members,
            "lag": self.lag,
        }


async def worker_group(settings: Settings, within: float = TIMEOUT_SECONDS) -> WorkerGroup:
    """The worker group's state, members and lag on the input topics, in ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            return await _describe(settings)
    except Exception as exc:
        return WorkerGroup(settings.app_id, error=exc.__class__.__name__)


async def _describe(settings: Settings) -> WorkerGroup:
    group = settings.app_id
    consumer = offsets.group_less_consumer(settings.kafka_bootstrap_servers)
    async with admin_client(settings) as admin:
        (response,) = await admin.describe_consumer_groups([group])
        # Each group: (error_code, group, state, protocol_type, protocol, members).
        described = [g for g in response.groups if g[1] == group]
        state = str(described[0][2]) if described else "unknown"
        members = len(described[0][5]) if described else 0
        topics = [settings.topic(name) for name in INPUT_TOPICS]
        tps = [tp for topic in topics for tp in await offsets.partitions(admin, topic)]
        await consumer.start()
        try:
            ends = await offsets.high_watermarks(consumer, tps)
        finally:
            await stop_consumer(consumer)
        done = await offsets.committed(admin, group, tps)
    lag = dict.fromkeys(INPUT_TOPICS, 0)
    for tp, end in ends.items():
        lag[tp.topic.removeprefix(settings.topic_prefix)] += max(0, end - done[tp])
    return WorkerGroup(group, state, members, lag)
