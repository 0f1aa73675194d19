"""Dead-letter records (CONTRACT 2.3): every input that cannot be accepted, with the reason,
and the same records read back for inspection and redrive."""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from memstream.errors import InvalidEvent
from memstream.events.origin import Origin


def kafka_time(timestamp: float | None) -> datetime | None:
    """A Kafka timestamp (seconds) as a UTC datetime; None when absent (Kafka's -1) or outside
    years 1 to 9999, where a producer's CreateTime can still put it."""
    if timestamp is None or timestamp < 0:
        return None
    try:
        return datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, ValueError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """Where an input record came from, with its raw key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: float | None  # seconds since the epoch, as Kafka stamped the record
    key: bytes | None
    value: bytes | None
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


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _source(source: SourceRecord) -> dict[str, Any]:
    moment = kafka_time(source.timestamp)
    out: dict[str, Any] = {
        "topic": source.topic,
        "partition": source.partition,
        "offset": source.offset,
        "timestamp": _rfc3339(moment) if moment is not None else None,
    }
    if source.origin is not None:
        first = source.origin
        out["origin"] = {"topic": first.topic, "partition": first.partition, "offset": first.offset}
    stamp = source.timestamp
    # Kafka's own range (int64 milliseconds); no broker stamped anything beyond it.
    if moment is None and stamp is not None and math.isfinite(stamp) and abs(stamp) < 2**63 / 1000:
        # RFC 3339 has no year 10000: the raw stamp still says what the producer claimed.
        out["timestamp_ms"] = round(stamp * 1000)
    return out


def dead_letter(reason: str, detail: str, stage: str, source: SourceRecord) -> DeadLetter:
    """Build the dead-letter record for ``source``; the payload is kept byte for byte."""
    payload: str | None
    encoding = "utf8"
    if source.value is None:
        payload = None
    else:
        try:
            payload = source.value.decode("utf-8")
        except UnicodeDecodeError:
            payload = base64.b64encode(source.value).decode("ascii")
            encoding = "base64"
    record = {
        "reason": reason,
        "detail": detail,
        "stage": stage,
        "source": _source(source),
        "payload": payload,
        "payload_encoding": encoding,
        "failed_at": _rfc3339(datetime.now(UTC)),
    }
    return DeadLetter(key=source.key, value=orjson.dumps(record), reason=reason)


@dataclass(frozen=True, slots=True)
class Letter:
    """A dead letter read back from its topic: where it sits, why it failed, the original."""

    partition: int  # of the dead-letter topic
    offset: int
    key: bytes | None
    reason: str
    stage: str
    detail: str
    source_topic: str
    source_partition: int | None
    source_offset: int | None
    failed_at: datetime | None
    payload: bytes | None
    origin: Origin | None = None  # the public record it stems from, when not its source

    @property
    def first(self) -> Origin | None:
        """Where the public record the letter stems from sits, when known."""
        if self.origin is not None:
            return self.origin
        if self.source_partition is None or self.source_offset is None:
            return None
        return Origin(self.source_topic, self.source_partition, self.source_offset)


def read_letter(partition: int, offset: int, key: bytes | None, value: bytes | None) -> Letter:
    """Decode one dead-letter record; raises ``ValueError`` when it is not one."""
    try:
        record = orjson.loads(value or b"")
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    source = record.get("source")
    if not isinstance(source, dict):
        source = {}
    return Letter(
        partition=partition,
        offset=offset,
        key=key,
        reason=_text(record.get("reason")),
        stage=_text(record.get("stage")),
        detail=_text(record.get("detail")),
        source_topic=_text(source.get("topic")),
        source_partition=_integer(source.get("partition")),
        source_offset=_integer(source.get("offset")),
        failed_at=_time(record.get("failed_at")),
        payload=_payload(record.get("payload"), record.get("payload_encoding")),
        origin=_origin(source.get("origin")),
    )


def _origin(value: Any) -> Origin | None:
    if not isinstance(value, dict):
        return None
    topic = value.get("topic")
    partition, offset = _integer(value.get("partition")), _integer(value.get("offset"))
    if not isinstance(topic, str) or partition is None or offset is None:
        return None
    return Origin(topic, partition, offset)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _payload(payload: Any, encoding: Any) -> bytes | None:
    if not isinstance(payload, str):
        return None
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error:
            raise ValueError("payload is not base64") from None
    return payload.encode("utf-8")
