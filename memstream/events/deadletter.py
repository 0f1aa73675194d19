"""Dead letters of the stages: the input record a stage read, and its dead letter ready to
publish. The record itself is ``memstream_client.contract.deadletter``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from memstream import tracing
from memstream.errors import InvalidEvent
from memstream.events.origin import Origin
from memstream_client.contract.deadletter import dead_letter_value, kafka_time


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """Where an input record came from, with its raw key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: float | None  # seconds since the epoch, as Kafka stamped the record
    key: bytes | None
    value: bytes | None
    headers: tracing.Headers = ()  # the trace context among them (memstream.tracing)
    # The public record this one stems from, when it is a retry or a redriven dead letter.
    origin: Origin | None = None

    @property
    def first(self) -> Origin:
        """Where the public record this work stems from sits (this record, on a first try)."""
        return self.origin or Origin(self.topic, self.partition, self.offset)

    @property
    def time(self) -> datetime:
        """The record's Kafka timestamp (now, when the broker gave none); raises
        ``InvalidEvent`` (``invalid_timestamp``) when it is no date in years 1 to 9999."""
        if self.timestamp is None or self.timestamp < 0:
            return datetime.now(UTC)
        moment = kafka_time(self.timestamp)
        if moment is None:
            raise InvalidEvent(
                "invalid_timestamp",
                f"The record has no created_at and its Kafka timestamp ({self.timestamp!r} s "
                "since the epoch) is no date in years 1 to 9999.",
            )
        return moment


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected record, ready to publish: the original key and a JSON value."""

    key: bytes | None
    value: bytes
    reason: str
    headers: tuple[tuple[str, bytes], ...] = ()


def dead_letter(reason: str, detail: str, stage: str, source: SourceRecord) -> DeadLetter:
    """Build the dead-letter record for ``source``; the payload is kept byte for byte."""
    record = dead_letter_value(
        reason,
        detail,
        stage,
        topic=source.topic,
        partition=source.partition,
        offset=source.offset,
        timestamp=source.timestamp,
        payload=source.value,
        origin=source.origin,
    )
    headers = tracing.continuing(source.headers)
    return DeadLetter(key=source.key, value=orjson.dumps(record), reason=reason, headers=headers)
