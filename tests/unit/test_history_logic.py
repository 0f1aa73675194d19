"""The history stage's pure logic: triage, stored form, dead-letter records, cache encoding."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import orjson
import pytest

from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.events.validate import validator
from memstream.history import triage
from memstream.store.cache import decode_member, encode_member, score
from memstream.text.tokens import count_tokens


def record(value: bytes | None, offset: int = 0, key: bytes | None = b"c1") -> SourceRecord:
    return SourceRecord("memory.message-written", 3, offset, 1_767_225_600.25, key, value)


def event(**fields: object) -> bytes:
    base = {
        "event_id": "e1",
        "tenant_id": 7,
        "user_id": "u1",
        "conversation_id": "c1",
        "role": "user",
        "content": "I prefer window seats",
    }
    base.update(fields)
    return orjson.dumps(base)


def test_valid_event_becomes_a_stored_message_with_its_token_count() -> None:
    out = triage([record(event(created_at="2026-03-01T10:00:00+02:00"))], 100)
    (stored, source), *_ = out.accepted
    assert stored.tenant_id == "7"
    assert stored.token_count == count_tokens("I prefer window seats")
    assert stored.created_at == datetime(2026, 3, 1, 8, 0)  # naive UTC
    assert source.offset == 0 and not out.rejected and out.dropped == 0


def test_missing_created_at_takes_the_record_time() -> None:
    (stored, _), *_ = triage([record(event())], 100).accepted
    assert stored.created_at == datetime(2026, 1, 1, 0, 0, 0, 250000)


@pytest.mark.parametrize(
    ("message_type", "kept"),
    [("chat", True), ("tool_call", False), ("tool_result", False), ("status", False)],
)
def test_sub_agent_rule(message_type: str, kept: bool) -> None:
    out = triage([record(event(conversation_id="agent:c9", message_type=message_type))], 100)
    assert len(out.accepted) == int(kept) and out.dropped == int(not kept)
    if kept:
        stored = out.accepted[0][0]
        assert stored.conversation_id == "c9"
        assert stored.source_conversation_id == "agent:c9"


def test_non_chat_messages_of_ordinary_conversations_are_kept() -> None:
    out = triage([record(event(message_type="tool_call", role="assistant"))], 100)
    assert len(out.accepted) == 1


def test_same_event_twice_in_a_batch_is_accepted_once() -> None:
    out = triage([record(event(), 0), record(event(), 1), record(event(event_id="e2"), 2)], 100)
    assert [m.event_id for m, _ in out.accepted] == ["e1", "e2"]


def test_bad_records_are_rejected_with_reasons_and_good_ones_kept() -> None:
    out = triage(
        [record(b"\xff"), record(event()), record(event(content="x" * 101)), record(None)], 100
    )
    assert [r.reason for r in out.rejected] == [
        "invalid_encoding",
        "content_too_large",
        "empty_value",
    ]
    assert len(out.accepted) == 1


def test_dead_letter_record_keeps_the_payload_and_matches_the_schema() -> None:
    letter = dead_letter("invalid_json", "The value is not JSON.", "history", record(b"{x", 12))
    value = orjson.loads(letter.value)
    assert letter.key == b"c1"
    assert value["payload"] == "{x" and value["payload_encoding"] == "utf8"
    assert value["source"] == {
        "topic": "memory.message-written",
        "partition": 3,
        "offset": 12,
        "timestamp": "2026-01-01T00:00:00.250Z",
    }
    validator("dead-letter.v1").validate(value)


def test_dead_letter_of_binary_payload_is_base64() -> None:
    value = orjson.loads(
        dead_letter("invalid_encoding", "x.", "history", record(b"\xff\x00")).value
    )
    assert value["payload_encoding"] == "base64"
    assert base64.b64decode(value["payload"]) == b"\xff\x00"


def test_cache_member_round_trip_and_determinism() -> None:
    (stored, _), *_ = triage(
        [record(event(created_at="2026-01-02T03:04:05.000006Z"))], 100
    ).accepted
    assert encode_member(stored) == encode_member(stored)
    cached = decode_member(encode_member(stored))
    assert (cached.event_id, cached.content) == ("e1", stored.content)
    assert cached.token_count == stored.token_count == count_tokens(stored.content)
    assert score(stored.created_at) == datetime(2026, 1, 2, 3, 4, 5, 6, UTC).timestamp() * 1e6
