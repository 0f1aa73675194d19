"""The retry stage: records waiting on the retry tiers go back to their stage's topic when due.

Read with a consumer of its own (group ``<app id>.retry``; a worker of some stage roles reads
in ``<its group>.retry`` and sends back only its roles' records) rather than a Faust agent: a
record that is not due yet is left unread by pausing its partition until then, so nothing is
held in flight while it waits. A Faust agent would hold it, and every rebalance waits for the
events in flight. Each tier waits the same time for all its records, so a partition's head is
always the next one due; other partitions and tiers go on meanwhile. An offset is committed
only once the record before it is back on its topic, and a record that comes back twice (a
crash, a rebalance) is handled twice with no visible change.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from functools import partial

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError

from memstream import metrics, tracing
from memstream.broker.clients import make_consumer, stop_consumer
from memstream.events.deadletter import SourceRecord
from memstream.failure.inplace import retry_forever
from memstream.failure.tiers import RetryRecord
from memstream.roles import inputs_of
from memstream.streams import delivery
from memstream.streams.app import app, group, roles, settings
from memstream.streams.stage import publish_dead_letter
from memstream.streams.topics import retry_tiers, stage_inputs

log = logging.getLogger(__name__)
STAGE = "retry"
POLL_SECONDS = 1.0
ours = {settings.topic(name) for name in inputs_of(*roles)}


class Redelivery:
    """Sends due records from the tier topics back to their stages; see the module docstring."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.waiting: dict[TopicPartition, float] = {}  # paused partitions: when the head is due
        self._counted: set[TopicPartition] = set()

    async def run(self) -> None:
        while True:
            await self.step()

    async def step(self) -> None:
        """Resume the partitions whose head came due, then handle one fetch."""
        self._resume_due()
        now = time.time()
        wait = min([POLL_SECONDS, *(due - now for due in self.waiting.values())])
        batch = await self.consumer.getmany(timeout_ms=max(0, int(wait * 1000)), max_records=500)
        for tp, records in batch.items():
            handled = await self._partition(tp, records)
            if handled is not None:
                await self._commit(tp, handled)
        await self._count_waiting()

    def _resume_due(self) -> None:
        assigned = self.consumer.assignment()
        now = time.time()
        for tp, due in list(self.waiting.items()):
            if tp not in assigned:
                del self.waiting[tp]  # revoked: its new owner reads it from the committed offset
            elif due <= now:
                del self.waiting[tp]
                self.consumer.resume(tp)

    async def _partition(
        self, tp: TopicPartition, records: Sequence[ConsumerRecord[bytes, bytes]]
    ) -> int | None:
        """Send back the due records, in order; stop at the first one not due. Answers the
        offset to commit (the next one to read), None when nothing was handled."""
        handled: int | None = None
        for record in records:
            source = SourceRecord(
                tp.topic, tp.partition, record.offset, record.timestamp / 1000, record.key,
                record.value, record.headers,
            )  # fmt: skip
            try:
                pending = RetryRecord.decode(record.value)
                target = stage_inputs[pending.topic]
            except (ValueError, KeyError) as exc:
                detail = f"The record is no retry of a memstream stage: {exc!r}."[:500]
                await publish_dead_letter(STAGE, source, "invalid_payload", detail)
                metrics.RECORDS.labels(STAGE, "dead_lettered").inc()
                handled = record.offset + 1
                continue
            if target.get_topic_name() not in ours:
                # A stage of another role: that role's group reads the tiers too and sends it.
                handled = record.offset + 1
                continue
            if not pending.due(time.time()):
                # Read it again when due; nothing later on this tier is due before it.
                self.consumer.seek(tp, record.offset)
                self.consumer.pause(tp)
                self.waiting[tp] = pending.not_before
                break
            send = partial(
                delivery.send_durably, target, pending.key, pending.value,
                pending.headers(), pending.timestamp,
            )  # fmt: skip
            with tracing.consumed(STAGE, record.headers):
                await retry_forever(STAGE, "send", send, transient=(Exception,))
            metrics.RECORDS.labels(STAGE, "finished").inc()
            handled = record.offset + 1
        return handled

    async def _count_waiting(self) -> None:
        assigned = self.consumer.assignment()
        for tp in assigned:
            end = self.consumer.highwater(tp)
            if end is not None:
                waiting = max(0, end - await self.consumer.position(tp))
                metrics.RETRY_WAITING.labels(tp.topic, str(tp.partition)).set(waiting)
        for tp in self._counted - assigned:
            with contextlib.suppress(KeyError):
                metrics.RETRY_WAITING.remove(tp.topic, str(tp.partition))
        self._counted = set(assigned)

    async def _commit(self, tp: TopicPartition, offset: int) -> None:
        try:
            await self.consumer.commit({tp: offset})
        except (CommitFailedError, IllegalStateError) as exc:
            # The partition moved to another worker meanwhile: it sends those records again.
            log.warning("retry: commit of %s at %d failed (%r)", tp, offset, exc)


@app.task  # type: ignore[untyped-decorator]
async def redeliver() -> None:
    consumer = make_consumer(
        settings,
        *(topic.get_topic_name() for topic in retry_tiers.values()),
        group_id=f"{group}.retry",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        await Redelivery(consumer).run()
    finally:
        await stop_consumer(consumer)
