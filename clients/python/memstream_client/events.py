"""The two events platform services publish, built and checked before they are sent: what the
worker would send to ``dead-letter`` is refused here, with the same reason."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from memstream_client.contract.errors import InvalidEvent
from memstream_client.contract.events import parse_message, parse_session_end
from memstream_client.contract.schemas import validator
from memstream_client.contract.topics import MESSAGE_WRITTEN, SESSION_ENDED, InputTopic

Topic = InputTopic
SCHEMAS: dict[str, str] = {
    MESSAGE_WRITTEN: "message-written.v1",
    SESSION_ENDED: "session-ended.v1",
}


def new_event_id() -> str:
    """A fresh event id (a random UUID). Publishing one message again under the id it was first
    published with stores it once; a new id stores it twice."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Event:
    """One checked event: its topic (without prefix), key and value as they go to the broker."""

    topic: Topic
    event_id: str
    key: bytes
    value: bytes


def rfc3339(moment: datetime | str | None) -> str | None:
    """A time as the schemas want it; a naive ``datetime`` is refused (it has no offset)."""
    if moment is None or isinstance(moment, str):
        return moment
    if moment.tzinfo is None:
        raise InvalidEvent("invalid_timestamp", f"{moment.isoformat()} has no UTC offset.")
    return moment.isoformat()


def checked(topic: Topic, fields: dict[str, Any], max_content_chars: int) -> Event:
    """``fields`` as an event of ``topic``, with an ``event_id`` when it has none, checked as
    the worker reads it (so a refusal names the reason it would dead-letter it with: the content
    limit, calendar edges) and against the topic's JSON Schema; ``InvalidEvent`` when either
    refuses it."""
    from jsonschema.exceptions import best_match

    event = {k: v for k, v in fields.items() if v is not None}
    event.setdefault("event_id", new_event_id())
    try:
        value = orjson.dumps(event)
    except orjson.JSONEncodeError as exc:
        raise InvalidEvent("schema_violation", f"The event is not JSON: {exc}.") from None
    if topic == MESSAGE_WRITTEN:
        parse_message(value, max_content_chars)
    else:
        parse_session_end(value)
    error = best_match(validator(SCHEMAS[topic]).iter_errors(event))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "value"
        raise InvalidEvent("schema_violation", f"{where}: {error.message}")
    return Event(topic, str(event["event_id"]), str(event["conversation_id"]).encode(), value)
