"""The JSON Schemas in ``schemas/`` and the event models accept and reject the same values."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest

from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream_client.contract.events import (
    MessageWritten,
    SessionEnded,
    parse_message,
    parse_session_end,
)
from memstream_client.contract.schemas import load_schema, schema_names, validator

MAX_CONTENT = 32768  # the default of MEMSTREAM_MAX_CONTENT_CHARS, also the schema's maxLength
DROP = object()  # marks a field to leave out of the sample

MESSAGE = {
    "event_id": "evt-1",
    "tenant_id": "acme",
    "user_id": "u-1",
    "agent_id": "helper",
    "conversation_id": "c-1",
    "role": "user",
    "message_type": "chat",
    "content": "Hello there",
    "created_at": "2024-05-01T12:30:00.250Z",
    "metadata": {"channel": "web"},
}
SESSION_END = {
    "event_id": "evt-9",
    "tenant_id": "acme",
    "user_id": "u-1",
    "agent_id": None,
    "conversation_id": "c-1",
    "ended_at": "2024-05-01T13:00:00+02:00",
}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    value = {**base, **changes}
    return {k: v for k, v in value.items() if v is not DROP}


MESSAGE_SAMPLES = [
    ("full", MESSAGE, True),
    (
        "minimal",
        _with(MESSAGE, agent_id=DROP, message_type=DROP, created_at=DROP, metadata=DROP),
        True,
    ),
    ("agent_id null", _with(MESSAGE, agent_id=None), True),
    ("created_at null", _with(MESSAGE, created_at=None), True),
    ("metadata null", _with(MESSAGE, metadata=None), True),
    ("extra unknown fields", _with(MESSAGE, trace_id="t-1", nested={"a": [1, 2]}), True),
    (
        "sub-agent tool call",
        _with(MESSAGE, conversation_id="agent:c-1", message_type="tool_call"),
        True,
    ),
    ("integer tenant and user ids", _with(MESSAGE, tenant_id=42, user_id=-7), True),
    ("largest unsigned 64-bit id", _with(MESSAGE, tenant_id=2**64 - 1), True),
    ("id above 64 bits", _with(MESSAGE, tenant_id=2**64), False),
    ("128-char ids", _with(MESSAGE, event_id="e" * 128, conversation_id="c" * 128), True),
    ("129-char event_id", _with(MESSAGE, event_id="e" * 129), False),
    ("129-char agent_id", _with(MESSAGE, agent_id="a" * 129), False),
    ("empty event_id", _with(MESSAGE, event_id=""), False),
    ("whitespace-only conversation_id", _with(MESSAGE, conversation_id=" \t\n"), False),
    # The database pads with spaces when it compares: "acme " would be tenant "acme" there.
    ("tenant_id with a trailing space", _with(MESSAGE, tenant_id="acme "), False),
    ("user_id with a leading space", _with(MESSAGE, user_id=" u1"), False),
    ("conversation_id ending in a newline", _with(MESSAGE, conversation_id="c1\n"), False),
    ("agent_id with a trailing tab", _with(MESSAGE, agent_id="a1\t"), False),
    ("ids with inner white space", _with(MESSAGE, user_id="u 1", conversation_id="c\n1"), True),
    ("one-character ids", _with(MESSAGE, tenant_id="t", user_id="u"), True),
    ("empty agent_id", _with(MESSAGE, agent_id=""), False),
    ("integer event_id", _with(MESSAGE, event_id=17), False),
    ("boolean tenant_id", _with(MESSAGE, tenant_id=True), False),
    ("boolean user_id", _with(MESSAGE, user_id=False), False),
    ("float tenant_id", _with(MESSAGE, tenant_id=1.5), False),
    ("integral float tenant_id", _with(MESSAGE, tenant_id=1.0), False),
    ("null tenant_id", _with(MESSAGE, tenant_id=None), False),
    ("missing event_id", _with(MESSAGE, event_id=DROP), False),
    ("missing tenant_id", _with(MESSAGE, tenant_id=DROP), False),
    ("missing conversation_id", _with(MESSAGE, conversation_id=DROP), False),
    ("missing role", _with(MESSAGE, role=DROP), False),
    ("missing content", _with(MESSAGE, content=DROP), False),
    ("unknown role", _with(MESSAGE, role="robot"), False),
    ("unknown message_type", _with(MESSAGE, message_type="image"), False),
    ("null message_type", _with(MESSAGE, message_type=None), False),
    ("content not a string", _with(MESSAGE, content=["hi"]), False),
    ("empty content", _with(MESSAGE, content=""), True),
    ("content at the limit", _with(MESSAGE, content="é" * MAX_CONTENT), True),
    ("content too large", _with(MESSAGE, content="x" * (MAX_CONTENT + 1)), False),
    ("metadata a list", _with(MESSAGE, metadata=["a"]), False),
    ("metadata a string", _with(MESSAGE, metadata="{}"), False),
    ("created_at with offset", _with(MESSAGE, created_at="2024-01-01T00:00:00-05:30"), True),
    ("created_at lower-case t", _with(MESSAGE, created_at="2024-01-01t00:00:00Z"), True),
    ("created_at lower-case z", _with(MESSAGE, created_at="2024-01-01T00:00:00z"), False),
    ("created_at leap second", _with(MESSAGE, created_at="2016-12-31T23:59:60Z"), False),
    ("created_at yesterday", _with(MESSAGE, created_at="yesterday"), False),
    ("created_at date only", _with(MESSAGE, created_at="2024-01-01"), False),
    ("created_at no offset", _with(MESSAGE, created_at="2024-01-01T00:00:00"), False),
    ("created_at space separator", _with(MESSAGE, created_at="2024-01-01 00:00:00Z"), False),
    ("created_at no such day", _with(MESSAGE, created_at="2024-02-30T00:00:00Z"), False),
    ("created_at epoch number", _with(MESSAGE, created_at=1714566600), False),
]

SESSION_SAMPLES = [
    ("full", SESSION_END, True),
    ("minimal", _with(SESSION_END, agent_id=DROP, ended_at=DROP), True),
    ("integer ids", _with(SESSION_END, tenant_id=7, user_id=8), True),
    ("extra fields", _with(SESSION_END, role="user", reason="timeout"), True),
    ("missing user_id", _with(SESSION_END, user_id=DROP), False),
    ("whitespace-only event_id", _with(SESSION_END, event_id="   "), False),
    ("tenant_id with a trailing space", _with(SESSION_END, tenant_id="acme "), False),
    ("event_id with a leading space", _with(SESSION_END, event_id=" e1"), False),
    ("boolean tenant_id", _with(SESSION_END, tenant_id=False), False),
    ("ended_at no offset", _with(SESSION_END, ended_at="2024-01-01T00:00:00"), False),
    ("ended_at yesterday", _with(SESSION_END, ended_at="yesterday"), False),
]


def _raw(value: dict[str, Any]) -> bytes:
    # The stdlib writes integers of any size (orjson stops at 64 bits) and 1.0 as a float.
    return json.dumps(value).encode()


def _model_accepts(parse: Any, raw: bytes) -> bool:
    try:
        parse(raw)
    except InvalidEvent:
        return False
    return True


def _schema_accepts(name: str, raw: bytes) -> bool:
    # Judge what the worker decodes, not what the test wrote.
    return validator(name).is_valid(orjson.loads(raw))


def _parse_message(raw: bytes) -> MessageWritten:
    return parse_message(raw, max_content_chars=MAX_CONTENT)


@pytest.mark.parametrize(
    ("value", "expected"),
    [pytest.param(v, e, id=i) for i, v, e in MESSAGE_SAMPLES],
)
def test_message_written_schema_and_model_agree(value: dict[str, Any], expected: bool) -> None:
    raw = _raw(value)
    verdicts = {
        "schema": _schema_accepts("message-written.v1", raw),
        "model": _model_accepts(_parse_message, raw),
    }
    assert verdicts == {"schema": expected, "model": expected}


@pytest.mark.parametrize(
    ("value", "expected"),
    [pytest.param(v, e, id=i) for i, v, e in SESSION_SAMPLES],
)
def test_session_ended_schema_and_model_agree(value: dict[str, Any], expected: bool) -> None:
    raw = _raw(value)
    verdicts = {
        "schema": _schema_accepts("session-ended.v1", raw),
        "model": _model_accepts(parse_session_end, raw),
    }
    assert verdicts == {"schema": expected, "model": expected}


# Forms that ISO 8601 parsers take but RFC 3339 (and so both sides) refuses, and an id of
# nothing but a control character that counts as white space.
STRICTER_THAN_ISO = [
    pytest.param(_with(MESSAGE, created_at="2024-01-01T00:00Z"), id="no seconds"),
    pytest.param(_with(MESSAGE, created_at="20240101T000000Z"), id="ISO 8601 basic format"),
    pytest.param(_with(MESSAGE, created_at="2024-W01-1T00:00:00Z"), id="ISO week date"),
    pytest.param(_with(MESSAGE, event_id="\x1c"), id="id of U+001C only"),
]


@pytest.mark.parametrize("value", STRICTER_THAN_ISO)
def test_both_refuse_what_rfc_3339_refuses(value: dict[str, Any]) -> None:
    raw = _raw(value)
    assert _schema_accepts("message-written.v1", raw) is False
    assert _model_accepts(_parse_message, raw) is False


@pytest.mark.parametrize(
    ("schema_name", "model"),
    [("message-written.v1", MessageWritten), ("session-ended.v1", SessionEnded)],
)
def test_schema_fields_match_the_model(schema_name: str, model: type[Any]) -> None:
    schema = load_schema(schema_name)
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert set(schema["properties"]) == set(model.model_fields)
    assert set(schema["required"]) == required
    assert schema["additionalProperties"] is True


def test_content_too_large_has_its_own_reason() -> None:
    raw = _raw(_with(MESSAGE, content="x" * (MAX_CONTENT + 1)))
    with pytest.raises(InvalidEvent) as caught:
        _parse_message(raw)
    assert caught.value.reason == "content_too_large"
    assert load_schema("message-written.v1")["properties"]["content"]["maxLength"] == MAX_CONTENT


@pytest.mark.parametrize(
    "name", ["message-written.v1", "session-ended.v1", "dead-letter.v1", "memory-changed.v1"]
)
def test_schemas_are_well_formed_and_documented(name: str) -> None:
    schema = load_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://memstream.dev/schemas/{name}.json"
    assert schema["title"] and schema["description"]
    validator(name)  # checks the schema against the draft 2020-12 meta-schema
    undocumented = [k for k, v in schema["properties"].items() if not v.get("description")]
    assert undocumented == []


def test_schema_names_and_loader() -> None:
    assert schema_names() == [
        "dead-letter.v1",
        "memory-changed.v1",
        "message-written.v1",
        "session-ended.v1",
    ]
    assert load_schema("dead-letter.v1.json") == load_schema("dead-letter.v1")
    assert validator("dead-letter.v1") is validator("dead-letter.v1")
    with pytest.raises(FileNotFoundError):
        load_schema("message-written.v9")
    with pytest.raises(ValueError):
        load_schema("../pyproject.toml")


def test_date_time_format_is_checked() -> None:
    # Without the rfc3339-validator package jsonschema skips "date-time" silently.
    record = _dead_letter_by_hand()
    record["failed_at"] = "not a time"
    assert not validator("dead-letter.v1").is_valid(record)


def _dead_letter_by_hand() -> dict[str, Any]:
    return {
        "reason": "invalid_json",
        "detail": "The value is not JSON: unexpected character: line 1 column 1 (char 0).",
        "stage": "ingest",
        "source": {
            "topic": "memory.message-written",
            "partition": 3,
            "offset": 1042,
            "timestamp": "2024-05-01T12:30:00.250Z",
        },
        "payload": "{not json",
        "payload_encoding": "utf8",
        "failed_at": "2024-05-01T12:30:01.002Z",
    }


def test_dead_letter_record_by_hand_validates() -> None:
    check = validator("dead-letter.v1")
    record = _dead_letter_by_hand()
    assert list(check.iter_errors(record)) == []
    no_value = {**record, "reason": "empty_value", "payload": None}
    no_value["source"] = {**record["source"], "timestamp": None}
    assert check.is_valid(no_value)
    binary = {**record, "reason": "invalid_encoding", "payload_encoding": "base64"}
    binary["payload"] = base64.b64encode(b"\xff\xfe").decode()
    assert check.is_valid(binary)


@pytest.mark.parametrize(
    "change",
    [
        {"reason": DROP},
        {"reason": "Invalid JSON"},
        {"detail": DROP},
        {"stage": ""},
        {"source": DROP},
        {"source": {"topic": "memory.message-written", "partition": 0, "offset": 1}},
        {"source": {"topic": "t", "partition": -1, "offset": 1, "timestamp": None}},
        {"source": {"topic": "t", "partition": 0, "offset": 1.0, "timestamp": None}},
        {"payload": DROP},
        {"payload": 123},
        {"payload_encoding": "hex"},
        {"failed_at": "2024-05-01 12:30:01"},
    ],
    ids=lambda change: ",".join(f"{k}={v!r}"[:40] for k, v in change.items()),
)
def test_broken_dead_letter_records_are_refused(change: dict[str, Any]) -> None:
    assert not validator("dead-letter.v1").is_valid(_with(_dead_letter_by_hand(), **change))


@pytest.mark.parametrize(
    "value", [b'{"event_id": "e1"}', b"\xff\xfe not utf-8", None], ids=["utf8", "base64", "none"]
)
def test_dead_letter_module_output_validates(value: bytes | None) -> None:
    source = SourceRecord(
        topic="memory.message-written",
        partition=0,
        offset=5,
        timestamp=1714566600.25 if value else None,
        key=b"c-1",
        value=value,
    )
    letter = dead_letter("schema_violation", "role: Field required.", "ingest", source)
    assert list(validator("dead-letter.v1").iter_errors(orjson.loads(letter.value))) == []
