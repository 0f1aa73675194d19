"""Public event models and the decoding of raw Kafka values into them.

The models mirror ``schemas/*.json`` (the source of truth); ``tests/unit/test_schemas.py``
proves both accept and reject the same samples. Like the API's bodies, each builds on first
use (``defer_build``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
)

from memstream_client.contract.errors import InvalidEvent

SUB_AGENT_PREFIX = "agent:"
TIMESTAMP_FIELDS = ("created_at", "ended_at")
_M = TypeVar("_M", bound=BaseModel)


def _id_from_int(value: Any) -> Any:
    # JSON integers are accepted for tenant and user ids and kept as decimal strings.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


# RFC 3339 date-time, the same pattern as the JSON Schemas: ``fromisoformat`` alone would also
# take ISO 8601 forms RFC 3339 forbids (week dates, no seconds, compact offsets).
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-5][0-9](\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _rfc3339(value: Any) -> Any:
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        shown = value[:40] if isinstance(value, str) else value
        raise ValueError(f"{shown!r} is not an RFC 3339 timestamp with a UTC offset")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not a valid date and time") from None


def _storable(value: datetime | None) -> datetime | None:
    # The record keeps UTC: near the calendar's edges (year 1 with a positive offset, year 9999
    # with a negative one) a time passes the pattern but has no UTC equivalent.
    if value is not None:
        try:
            value.astimezone(UTC)
        except (OverflowError, ValueError):
            shown = value.isoformat()
            raise ValueError(f"{shown} has no UTC equivalent in years 1 to 9999") from None
    return value


def _exact(value: str) -> str:
    # Python's notion of white space, the same as the schemas' "\\S" under jsonschema. The
    # database pads with spaces when it compares, so "u1 " would be "u1" there: refused.
    if not value.strip():
        raise ValueError("must contain a character that is not white space")
    if value != value.strip():
        raise ValueError("must not start or end with white space")
    return value


Id = Annotated[StrictStr, Field(min_length=1, max_length=128), AfterValidator(_exact)]
NumericId = Annotated[Id, BeforeValidator(_id_from_int)]
Timestamp = Annotated[datetime | None, BeforeValidator(_rfc3339), AfterValidator(_storable)]
Role = Literal["user", "assistant", "system", "tool"]
MessageType = Literal["chat", "tool_call", "tool_result", "status"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, defer_build=True)

    event_id: Id
    tenant_id: NumericId
    user_id: NumericId
    agent_id: Id | None = None
    conversation_id: Id


class MessageWritten(_Event):
    """``message-written`` v1: one chat message."""

    role: Role
    message_type: MessageType = "chat"
    content: StrictStr
    created_at: Timestamp = None
    metadata: dict[str, Any] | None = None

    @property
    def is_sub_agent(self) -> bool:
        return self.conversation_id.startswith(SUB_AGENT_PREFIX)

    @property
    def target_conversation_id(self) -> str:
        """The conversation a message is stored in (sub-agent chat goes to its parent)."""
        if self.is_sub_agent:
            return self.conversation_id[len(SUB_AGENT_PREFIX) :]
        return self.conversation_id


class SessionEnded(_Event):
    """``session-ended`` v1: the end of a conversation session."""

    ended_at: Timestamp = None


def decode_value(raw: bytes | None) -> dict[str, Any]:
    """Turn a Kafka value into a JSON object, or raise ``InvalidEvent`` saying why not."""
    if raw is None or raw == b"":
        raise InvalidEvent("empty_value", "The record has no value.")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(
            "invalid_encoding", f"The value is not UTF-8 (bad byte at position {exc.start})."
        ) from None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent("invalid_json", f"The value is not JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise InvalidEvent(
            "not_an_object", f"The value is a JSON {type(value).__name__}, not an object."
        )
    return value


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "value"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "") + "."


def parse_message(raw: bytes | None, max_content_chars: int) -> MessageWritten:
    """Validate one ``message-written`` value; raise ``InvalidEvent`` with the reason."""
    value = decode_value(raw)
    content = value.get("content")
    if isinstance(content, str) and len(content) > max_content_chars:
        raise InvalidEvent(
            "content_too_large",
            f"content has {len(content)} characters; the limit is {max_content_chars}.",
        )
    return _validate(MessageWritten, value)


def parse_session_end(raw: bytes | None) -> SessionEnded:
    """Validate one ``session-ended`` value; raise ``InvalidEvent`` with the reason."""
    return _validate(SessionEnded, decode_value(raw))


def _validate(model: type[_M], value: dict[str, Any]) -> _M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        only_time = all(e["loc"][:1] and e["loc"][0] in TIMESTAMP_FIELDS for e in exc.errors())
        reason = "invalid_timestamp" if only_time else "schema_violation"
        raise InvalidEvent(reason, _describe(exc)) from None
