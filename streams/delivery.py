"""How a stage sends: a record's source for its dead letter, dead letters and stage records
sent and acknowledged by the broker before the input's offset moves on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import faust

from memstream import tracing
from memstream.events.deadletter import DeadLetter, SourceRecord
from memstream.events.origin import origin_in
from memstream.streams.topics import dead_letter


def source_of(event: faust.EventT[Any]) -> SourceRecord:
    message = event.message
    headers = message.headers or ()
    return SourceRecord(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp=message.timestamp,
        key=message.key,
        value=message.value,
        headers=message.headers,
        origin=origin_in(headers.items() if isinstance(headers, Mapping) else headers),
    )


async def publish_dead_letters(letters: Sequence[DeadLetter]) -> None:
    """Send every letter and wait until the broker has them all (before offsets move on)."""
    pending = [
        await dead_letter.send(key=letter.key, value=letter.value, headers=list(letter.headers))
        for letter in letters
    ]
    await asyncio.gather(*pending)


async def send_durably(
    topic: faust.TopicT,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: float | None = None,
) -> None:
    """Send and wait for the broker's acknowledgement, so the input may be acknowledged;
    ``timestamp`` (seconds) is the record's Kafka time, now when None."""
    traced = tracing.headers(headers)  # the current trace goes on with the record
    await (await topic.send(key=key, value=value, headers=traced, timestamp=timestamp))
