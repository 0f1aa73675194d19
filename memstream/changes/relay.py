"""The relay: the outbox's unpublished rows onto ``memory-changed``, oldest first, then marked.

One relay per topic publishes at a time: it holds a lease row (``change_relay``) for a few
seconds and renews it before each batch, so workers started side by side never publish the
same rows in two orders. A batch is sent with an idempotent producer and marked published only
once the broker has every record of it; a relay that dies in between leaves the rows unmarked,
and whichever relay holds the lease next sends them again (at least once: consumers dedupe by
``change_id``). Rows are read in ``seq`` order and one user's changes share a key, so they
reach the topic, and its partition, in the order they were written. Right before a batch is
sent, the forget records are read again: a change recorded before a forget of its user goes out
without its text, whenever the relay read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import orjson
from aiokafka import AIOKafkaProducer
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import tracing
from memstream.broker.clients import producer
from memstream.settings import Settings
from memstream.store import outbox as outbox_rows
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.outbox import ChangeOutbox
from memstream_client.contract.changes import key_of, with_content

log = logging.getLogger(__name__)

BATCH = 500
LEASE_SECONDS = 15.0


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class ChangeRelay:
    """Publishes one deployment's outbox (its ``memory-changed`` topic) while it holds the lease."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings,
        outbox: ChangeOutbox,
        *,
        interval: float = 0.5,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self._engine = engine
        self._settings = settings
        self.outbox = outbox
        self.topic = outbox.topic
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex
        self.published = 0
        self.forgets = ForgetSet(ForgetStore(engine))

    async def run(self) -> None:
        """Relay until cancelled; a database or broker that fails is tried again later."""
        try:
            while True:
                try:
                    async with producer(self._settings, enable_idempotence=True) as client:
                        await self._relay(client)
                except Exception as exc:
                    log.warning("memory-changed relay cannot publish (%r); trying again", exc)
                    await asyncio.sleep(self.interval)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.release())

    async def _relay(self, client: AIOKafkaProducer) -> None:
        while True:
            # Cleared before reading: a change written meanwhile wakes the next round at once.
            self.outbox.written.clear()
            try:
                sent = await self.tick(client)
            except Exception as exc:
                log.warning("memory-changed relay: %r; trying again", exc)
                sent = 0
            if not sent:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.outbox.written.wait(), self.interval)

    async def tick(self, client: AIOKafkaProducer) -> int:
        """Publish one batch if this relay holds the lease; answers how many went out."""
        if not await self.hold_lease():
            return 0
        rows = await outbox_rows.unpublished(self._engine, self.topic, BATCH)
        if not rows:
            return 0
        await self.forgets.refresh(fresh=True)
        pending = []
        for row in rows:
            gone = self.forgets.of(row.tenant_id, row.user_id)
            text = None if gone and row.seq <= gone.change_seq else row.content
            value = with_content(orjson.loads(row.payload), text)
            key = key_of(row.tenant_id, row.user_id)
            with tracing.produced("memory-changed publish", row.traceparent):
                traced = tracing.headers() or None
                sent = await client.send(self.topic, orjson.dumps(value), key=key, headers=traced)
            pending.append(sent)
        await asyncio.gather(*pending)
        forgotten = {(r.tenant_id, r.user_id): r.seq for r in rows if r.change == "forgotten"}
        await self._mark([row.seq for row in rows], forgotten)
        self.published += len(rows)
        return len(rows)

    async def _mark(self, seqs: Sequence[int], forgotten: Mapping[tuple[str, str], int]) -> None:
        """Published: the text is no longer needed. A forgotten user's rows go once their
        ``forgotten`` changes are out, with those still pending when the user was forgotten."""
        await outbox_rows.mark_published(self._engine, self.topic, seqs, forgotten, _now())

    async def hold_lease(self) -> bool:
        """Take or renew the topic's lease; False while another relay holds it."""
        now = _now()
        until = now + timedelta(seconds=self.lease_seconds)
        return await outbox_rows.take_lease(self._engine, self.topic, self.owner, now, until)

    async def release(self) -> None:
        """Give the lease up (a worker stopping), so another relay takes over at once."""
        await outbox_rows.give_up_lease(self._engine, self.topic, self.owner)
