"""Dead-letter records (CONTRACT 2.3): every input that cannot be accepted, with the reason."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """Where an input record came from, with its raw key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: float | None  # seconds since the epoch, as Kafka stamped the record
    key: bytes | None
    value: bytes | None

    @property
    def time(self) -> datetime:
        """The record's Kafka timestamp (now, when the broker gave none)."""
        if self.timestamp is None:
            return datetime.now(UTC)
        return datetime.fromtimestamp(self.timestamp, UTC)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected record, ready to publish: the original key and a JSON value."""

    key: bytes | None
    value: bytes
    reason: str


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        "source": {
            "topic": source.topic,
            "partition": source.partition,
            "offset": source.offset,
            "timestamp": _rfc3339(source.time) if source.timestamp is not None else None,
        },
        "payload": payload,
        "payload_encoding": encoding,
        "failed_at": _rfc3339(datetime.now(UTC)),
    }
    return DeadLetter(key=source.key, value=orjson.dumps(record), reason=reason)
