"""The history stage agent: ``message-written`` into the record and the hot cache."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from memstream import metrics
from memstream.events.checks import summary_checks
from memstream.events.deadletter import SourceRecord
from memstream.history import STAGE, HistoryWriter, Triage
from memstream.runtime import Resources
from memstream.store.rebuilds import CacheRebuilds
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.shared import source_of
from memstream.streams.topics import message_written, summary_check

log = logging.getLogger(__name__)

# Batches in flight at once: the next batch is validated and counted while the previous one
# is still being written. Offsets are still acknowledged strictly in order.
IN_FLIGHT = 2


async def check_summaries(batch: Triage) -> None:
    """Ask the summary stage to look at the conversations this batch wrote to, one record per
    partition (not awaited, and a failure never fails the batch: a lost check is repeated by
    the next batch or the session's end)."""
    conversations = {(m.tenant_id, m.conversation_id) for m, _ in batch.accepted}
    try:
        for key, value in summary_checks(conversations, settings.topic_partitions):
            await summary_check.send(key=key, value=value)
    except Exception as exc:
        metrics.EVENTS.labels(STAGE, "summary_check_lost").inc()
        log.warning("summary checks of %d conversations not sent: %r", len(conversations), exc)


async def process(writer: HistoryWriter, records: list[SourceRecord]) -> None:
    await check_summaries(await writer.process(records))


Batch = tuple["asyncio.Task[object]", list[faust.EventT[Any]]]


async def acknowledge_in_order(stream: faust.Stream[Any], batches: asyncio.Queue[Batch]) -> None:
    """Acknowledge each batch once it is durable, oldest first; never one that failed."""
    while True:
        task, events = await batches.get()
        with metrics.BATCH_SECONDS.labels(STAGE).time():
            await task  # an exception here stops acknowledging: nothing after it commits
        for event in events:
            await stream.ack(event)


@app.agent(message_written)
async def history(stream: faust.StreamT[Any]) -> None:
    assert isinstance(stream, faust.Stream)
    resources = Resources.open(settings)  # its own pool: ingest never waits on other stages
    writer = HistoryWriter(
        resources.messages,
        resources.cache,
        shared.publish_dead_letters,
        rebuilds=CacheRebuilds(resources.engine),
        max_content_chars=settings.max_content_chars,
        max_backoff=settings.db_retry_max_seconds,
    )
    batches: asyncio.Queue[Batch] = asyncio.Queue(maxsize=IN_FLIGHT - 1)
    acker = asyncio.create_task(acknowledge_in_order(stream, batches))
    try:
        # noack_take: offsets are acknowledged by hand, only once the batch is durable.
        async for events in stream.noack_take(
            settings.batch_max_events, within=settings.batch_within_seconds
        ):
            records = [source_of(e) for e in events]
            task = asyncio.create_task(process(writer, records))
            put = asyncio.create_task(batches.put((task, list(events))))
            await asyncio.wait({put, acker}, return_when=asyncio.FIRST_COMPLETED)
            if acker.done():
                put.cancel()
                # A batch failed in a way the writer does not retry: stop the worker rather
                # than skip it; the group redelivers from the last committed offset.
                log.critical("history batch failed; stopping", exc_info=acker.exception())
                await app.crash(acker.exception() or RuntimeError("acknowledger stopped"))
                return
    finally:
        acker.cancel()
        await resources.close()
