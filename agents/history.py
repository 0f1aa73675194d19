"""The history stage agent: ``message-written`` into the record and the hot cache."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import faust

from memstream import metrics
from memstream.deadletter import DeadLetter, SourceRecord
from memstream.history import STAGE, HistoryWriter
from memstream.runtime import Resources
from streams.app import app, settings
from streams.topics import dead_letter, message_written


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


@app.agent(message_written)
async def history(stream: faust.StreamT[Any]) -> None:
    resources = Resources.open(settings)
    writer = HistoryWriter(
        resources.messages,
        resources.cache,
        publish_dead_letters,
        max_content_chars=settings.max_content_chars,
        max_backoff=settings.db_retry_max_seconds,
    )
    try:
        # noack_take: offsets are acknowledged by hand, only once the batch is durable.
        assert isinstance(stream, faust.Stream)
        async for events in stream.noack_take(
            settings.batch_max_events, within=settings.batch_within_seconds
        ):
            with metrics.BATCH_SECONDS.labels(STAGE).time():
                await writer.process([source_of(e) for e in events])
            for event in events:
                await stream.ack(event)
    finally:
        await resources.close()
