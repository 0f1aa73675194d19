"""The history stage agent: ``message-written`` into the record and the hot cache."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import faust

from memstream import metrics
from memstream.deadletter import DeadLetter, SourceRecord
from memstream.history import STAGE, HistoryWriter
from memstream.runtime import Resources
from streams.app import app, settings
from streams.topics import dead_letter, message_written

log = logging.getLogger(__name__)

# Batches in flight at once: the next batch is validated and counted while the previous one
# is still being written. Offsets are still acknowledged strictly in order.
IN_FLIGHT = 2


async def publish_dead_letters(letters: Sequence[DeadLetter]) -> None:
    """Send every letter and wait until the broker has them all (before offsets move on)."""
    pending = [await dead_letter.send(key=letter.key, value=letter.value) for letter in letters]
    await asyncio.gather(*pending)


def source_of(event: faust.EventT[Any]) -> SourceRecord:
    message = event.message
    return SourceRecord(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp=message.timestamp,
        key=message.key,
        value=message.value,
    )


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
    resources = Resources.open(settings)
    writer = HistoryWriter(
        resources.messages,
        resources.cache,
        publish_dead_letters,
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
            task = asyncio.create_task(writer.process([source_of(e) for e in events]))
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
