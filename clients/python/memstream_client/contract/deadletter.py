"""The ``dead-letter`` record (``schemas/dead-letter.v1.json``): every input memstream could
not accept, with the reason, as it is built and as it is read back (no IO)."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the public record a piece of work stems from sits: topic, partition, offset."""

    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.partition}:{self.offset}:{self.topic}".encode()

    @classmethod
    def decode(cls, raw: bytes | str | None) -> Origin | None:
        """An encoded origin; None for anything else."""
        if raw is None:
            return None
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        parts = text.split(":", 2)
        if len(parts) != 3 or not parts[2]:
            return None
        try:
            return cls(parts[2], int(parts[0]), int(parts[1]))
        except ValueError:
            return None


def kafka_time(timestamp: float | None) -> datetime | None:
    """A Kafka timestamp (seconds) as a UTC datetime; None when absent (Kafka's -1) or outside
    years 1 to 9999, where a producer's CreateTime can still put it."""
    if timestamp is None or timestamp < 0:
        return None
    try:
        return datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, ValueError, OSError):
        return None


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _source(
    topic: str, partition: int, offset: int, stamp: float | None, origin: Origin | None
) -> dict[str, Any]:
    moment = kafka_time(stamp)
    out: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": _rfc3339(moment) if moment is not None else None,
    }
    if origin is not None:
        out["origin"] = {
            "topic": origin.topic,
            "partition": origin.partition,
            "offset": origin.offset,
        }
    # Kafka's own range (int64 milliseconds); no broker stamped anything beyond it.
    if moment is None and stamp is not None and math.isfinite(stamp) and abs(stamp) < 2**63 / 1000:
        # RFC 3339 has no year 10000: the raw stamp still says what the producer claimed.
        out["timestamp_ms"] = round(stamp * 1000)
    return out


def dead_letter_value(
    reason: str,
    detail: str,
    stage: str,
    *,
    topic: str,
    partition: int,
    offset: int,
    timestamp: float | None,
    payload: bytes | None,
    origin: Origin | None = None,
) -> dict[str, Any]:
    """The dead-letter record of the input record at ``topic``/``partition``/``offset``
    (``timestamp`` in seconds, as Kafka stamped it); the payload is kept byte for byte.
    ``origin``: the public record it stems from, when it is a retry or a redriven letter."""
    text: str | None
    encoding = "utf8"
    if payload is None:
        text = None
    else:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = base64.b64encode(payload).decode("ascii")
            encoding = "base64"
    return {
        "reason": reason,
        "detail": detail,
        "stage": stage,
        "source": _source(topic, partition, offset, timestamp, origin),
        "payload": text,
        "payload_encoding": encoding,
        "failed_at": _rfc3339(datetime.now(UTC)),
    }


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
    trace: tuple[tuple[str, bytes], ...] = ()  # its trace headers: a redrive goes on with them
    origin: Origin | None = None  # the public record it stems from, when not its source

    @property
    def first(self) -> Origin | None:
        """Where the public record the letter stems from sits, when known."""
        if self.origin is not None:
            return self.origin
        if self.source_partition is None or self.source_offset is None:
            return None
        return Origin(self.source_topic, self.source_partition, self.source_offset)


# The W3C trace context headers a letter keeps, so that a redrive continues its trace.
TRACE_HEADERS = ("traceparent", "tracestate")


def read_letter(
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes | None]] | None = (),
) -> Letter:
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
        trace=tuple(
            (name, raw) for name, raw in headers or () if name in TRACE_HEADERS and raw is not None
        ),
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
