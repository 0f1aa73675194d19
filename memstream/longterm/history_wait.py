"""The session stage's wait for its messages: a session end is handled only once the history
stage has stored every message published before it.

The two input topics are consumed independently, so a ``session-ended`` can overtake the last
messages of its session. Every ``message-written`` partition is checked (sub-agent messages
carry other keys): the history stage's committed offset must reach the first record at or after
the session end's time, or the partition's end when the broker cannot look times up
(``memstream.broker.offsets``). Waiting for the end is never wrong, only longer: it also waits for
messages published after the session end. The wait is bounded and gives way to a rebalance:
a session end held while the group rebalances would hold the history stage too (a rebalance
waits for the records in flight), so it goes to a retry tier instead and comes back later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from memstream.broker import offsets
from memstream.broker.clients import group_less_consumer, make_admin, stop_consumer
from memstream.broker.topics import partitions
from memstream.errors import HistoryBehind
from memstream.roles import groups_running
from memstream.settings import BrokerSettings
from memstream_client.contract.topics import MESSAGE_WRITTEN


class HistoryOrdering:
    """How far the history stage has stored ``message-written``, from the group's committed
    offsets; one per worker, its admin client opened on first use."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.topic = settings.topic(MESSAGE_WRITTEN)
        self._lookups = offsets.TimeLookups()
        self._admin: AIOKafkaAdminClient | None = None

    async def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = make_admin(self.settings)
            await admin.start()
            self._admin = admin
        return self._admin

    async def targets(self, timestamp_ms: int) -> dict[TopicPartition, int]:
        """Per partition, the offset below which every record predates ``timestamp_ms``, or
        the partition's end where the broker cannot tell."""
        admin = await self._admin_client()
        tps = await partitions(admin, self.topic)
        # A consumer per call: one kept for the worker's life would outlive its event loop.
        consumer = group_less_consumer(self.settings)
        await consumer.start()
        try:
            ends = await offsets.high_watermarks(consumer, tps)
            return await self._lookups.first_at_or_after(consumer, ends, timestamp_ms)
        finally:
            await stop_consumer(consumer)

    async def stored_up_to(self, targets: dict[TopicPartition, int]) -> bool:
        """Whether the history stage has committed every partition up to its target."""
        admin = await self._admin_client()
        # Whichever group runs the history role (all roles, or some with history) stores them.
        groups = groups_running(self.settings.app_id, "history")
        found = await asyncio.gather(*(offsets.committed(admin, g, list(targets)) for g in groups))
        return all(max(d[tp] for d in found) >= target for tp, target in targets.items())

    async def wait(
        self,
        timestamp_ms: int,
        *,
        within: float,
        interrupted: Callable[[], bool] = lambda: False,
        poll: float = 0.25,
    ) -> None:
        """Return once the history stage has stored everything published before
        ``timestamp_ms``; ``HistoryBehind`` after ``within`` seconds, or as soon as
        ``interrupted()`` (the worker's group is rebalancing: the history stage cannot move
        until this worker lets go of what it holds, this wait included)."""
        targets = await self.targets(timestamp_ms)
        deadline = time.monotonic() + within
        while not await self.stored_up_to(targets):
            if interrupted():
                raise HistoryBehind("the worker group is rebalancing")
            if time.monotonic() >= deadline:
                raise HistoryBehind(f"the messages are not stored after {within:g} s")
            await asyncio.sleep(poll)

    async def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                await self._admin.close()
            self._admin = None
