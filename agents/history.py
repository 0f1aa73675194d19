"""The history stage: ``message-written`` into the record and the hot cache."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from memstream import metrics, tracing
from memstream.broker.clients import make_consumer, stop_consumer
from memstream.events.checks import summary_checks
from memstream.events.deadletter import SourceRecord
from memstream.events.origin import origin_in
from memstream.failure.inplace import retry_forever
from memstream.history import STAGE, HistoryWriter, Triage
from memstream.metrics import Lag
from memstream.roles import history_group
from memstream.runtime import Resources
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.rebuilds import CacheRebuilds
from memstream.streams import delivery
from memstream.streams.app import app, settings
from memstream.streams.topics import message_written, summary_check

log = logging.getLogger(__name__)

# Batches in flight at once: the next batch is read, validated and counted while the previous
# one is still being written. Offsets are still committed strictly in order.
IN_FLIGHT = 2
STOP_SECONDS = 10.0  # how long a stopping worker waits for its batches in flight


async def check_summaries(batch: Triage) -> None:
    """Ask the summary stage to look at the conversations this batch wrote to, one record per
    partition (not awaited, and a failure never fails the batch: a lost check is repeated by
    the next batch or the session's end)."""
    conversations = {(m.tenant_id, m.conversation_id) for m, _ in batch.accepted}
    try:
        for key, value in summary_checks(conversations, settings.topic_partitions):
            await summary_check.send(key=key, value=value, headers=tracing.headers())
    except Exception as exc:
        metrics.EVENTS.labels(STAGE, "summary_check_lost").inc()
        log.warning("summary checks of %d conversations not sent: %r", len(conversations), exc)


async def process(writer: HistoryWriter, records: list[SourceRecord]) -> None:
    with tracing.batch(STAGE, [r.headers for r in records]):
        await check_summaries(await writer.process(records))


def source(record: ConsumerRecord[bytes, bytes]) -> SourceRecord:
    timestamp = record.timestamp / 1000 if record.timestamp is not None else None
    return SourceRecord(
        record.topic, record.partition, record.offset, timestamp, record.key, record.value,
        record.headers,
        origin_in(record.headers),
    )  # fmt: skip


class HistoryStage:
    """Reads ``message-written`` in batches, writes each (``HistoryWriter``) and commits its
    offsets once it is durable, oldest batch first; never a batch that failed."""

    def __init__(self, consumer: AIOKafkaConsumer, writer: HistoryWriter) -> None:
        self.consumer = consumer
        self.writer = writer
        self.in_flight: deque[tuple[asyncio.Task[None], dict[TopicPartition, int]]] = deque()
        self.committed: dict[TopicPartition, int] = {}
        self._settling = asyncio.Lock()

    async def run(self) -> None:
        while True:
            fetched = await self.consumer.getmany(
                timeout_ms=int(settings.batch_within_seconds * 1000),
                max_records=settings.batch_max_events,
            )
            if not fetched:
                await self.settle()  # nothing new: finish and commit what is in flight
                continue
            records = [source(r) for batch in fetched.values() for r in batch]
            ends = {tp: batch[-1].offset + 1 for tp, batch in fetched.items()}
            self.in_flight.append((asyncio.create_task(process(self.writer, records)), ends))
            await self.settle(keep=IN_FLIGHT - 1)

    async def settle(self, keep: int = 0) -> None:
        """Wait for the oldest batches until ``keep`` are left in flight, committing each;
        a batch that failed raises (nothing after it is committed)."""
        async with self._settling:
            while len(self.in_flight) > keep:
                task, ends = self.in_flight[0]
                with metrics.BATCH_SECONDS.labels(STAGE).time():
                    await task
                self.in_flight.popleft()
                await self._commit(ends)

    async def _commit(self, ends: dict[TopicPartition, int]) -> None:
        assigned = self.consumer.assignment()
        ours = {tp: end for tp, end in ends.items() if tp in assigned}
        if not ours:
            return
        try:
            await self.consumer.commit(ours)
        except KafkaError as exc:
            # Lost to a rebalance or an outage: the next commit of the partition covers it, or
            # its new owner reads the batch again and writes it with no visible change.
            log.warning("history offsets not committed (%r)", exc)
            return
        self.committed.update(ours)

    def lag(self) -> list[Lag]:
        """The records of this worker's partitions not committed yet."""
        out: list[Lag] = []
        for tp in self.consumer.assignment():
            highwater = self.consumer.highwater(tp)
            if highwater is not None:
                done = self.committed.get(tp, 0)
                out.append((tp.topic, tp.partition, max(0, highwater - done)))
        return out

    def drop(self) -> None:
        """Cancel the batches in flight, uncommitted: their records are read again."""
        while self.in_flight:
            self.in_flight.popleft()[0].cancel()


class Handover(ConsumerRebalanceListener):  # type: ignore[misc]
    """Before partitions go to another worker, the batches in flight are written and
    committed, so the new owner starts where this one stopped."""

    def __init__(self) -> None:
        self.stage: HistoryStage | None = None

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if self.stage is not None and revoked:
            with contextlib.suppress(Exception):  # a failed batch stops the stage on its own
                await self.stage.settle()
            for tp in revoked:  # another worker commits them now
                self.stage.committed.pop(tp, None)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass


stage: HistoryStage | None = None
"""This worker's history stage, while it runs (its lag is reported with the worker's)."""


@app.task  # type: ignore[untyped-decorator]
async def history() -> None:
    """The history stage reads ``message-written`` with a plain Kafka consumer of its own
    (in the group ``MEMSTREAM_APP_ID``, memstream.roles) rather than a Faust agent: Faust
    builds an event, a task switch and an acknowledgement for each message, most of a worker's
    CPU at ingest rates, where this reads and commits whole batches."""
    global stage
    resources = Resources.open(settings)  # its own pool: ingest never waits on other stages
    writer = HistoryWriter(
        resources.messages,
        resources.cache,
        delivery.publish_dead_letters,
        rebuilds=CacheRebuilds(resources.engine),
        max_content_chars=settings.max_content_chars,
        max_backoff=settings.db_retry_max_seconds,
        forgets=ForgetSet(ForgetStore(resources.engine), settings.forget_refresh_seconds),
    )
    consumer = make_consumer(
        settings,
        group_id=history_group(settings.app_id),
        client_id=f"{settings.app_id}-history",
        enable_auto_commit=False,
        # A new group starts at the beginning: nothing published before a first worker is lost.
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1024 * 1024,
        # A batch may wait out a long database outage (it is retried, never skipped).
        max_poll_interval_ms=1_000_000,
    )
    handover = Handover()
    consumer.subscribe([message_written.get_topic_name()], listener=handover)
    await retry_forever(STAGE, "kafka_connect", consumer.start, transient=(KafkaError, OSError))
    stage = handover.stage = HistoryStage(consumer, writer)
    try:
        await stage.run()
    except asyncio.CancelledError:
        # The worker stops: commit what is written by now, so the next owner need not read
        # it again (what is not is read again, and written with no visible change).
        with contextlib.suppress(Exception):
            await asyncio.wait_for(stage.settle(), STOP_SECONDS)
        raise
    except Exception as exc:
        # A batch failed in a way the writer does not retry: stop the worker rather than skip
        # it; the group redelivers from the last committed offset.
        log.critical("history batch failed; stopping", exc_info=exc)
        await app.crash(exc)
    finally:
        stage.drop()
        stage = handover.stage = None
        await stop_consumer(consumer)
        await resources.close()
