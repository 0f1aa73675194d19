"""The history stage's pure logic: triage, stored form, dead-letter records, cache encoding."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.history import Triage, triage
from memstream.store.cache import decode_member, encode_member, score
from memstream.text.tokens import count_tokens
from memstream_client.contract.deadletter import kafka_time
from memstream_client.contract.events import parse_session_end
from memstream_client.contract.schemas import validator


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


# --- poison input: values the schema accepts but that break arithmetic --------------------------

KNOWN_REASONS = {
    "empty_value",
    "invalid_encoding",
    "invalid_json",
    "not_an_object",
    "schema_violation",
    "invalid_timestamp",
    "content_too_large",
}
YEAR_10000 = 253_402_300_800.0  # 10000-01-01T00:00:00Z in seconds: a CreateTime Kafka accepts
FIRST, LAST = datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)


def stamped(value: bytes | None, timestamp: float | None, offset: int = 0) -> SourceRecord:
    return SourceRecord("memory.message-written", 0, offset, timestamp, b"c1", value)


def rfc3339(moment: datetime, minutes: int, fraction: str = "") -> str:
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    wall = moment.replace(microsecond=0).isoformat()  # strftime writes year 1 as "1"
    return f"{wall}{fraction}{sign}{hours:02d}:{mins:02d}"


def has_utc(moment: datetime, minutes: int) -> bool:
    """Whether local ``moment`` at a UTC offset of ``minutes`` is a UTC time in years 1..9999,
    counted in microseconds since 0001-01-01 rather than with datetime arithmetic."""
    micros = (moment - FIRST) // timedelta(microseconds=1) - minutes * 60_000_000
    return 0 <= micros <= (LAST - FIRST) // timedelta(microseconds=1)


def letters_of(out: Triage) -> list[dict[str, Any]]:
    values = [orjson.loads(letter.value) for letter in out.rejected]
    for value in values:
        validator("dead-letter.v1").validate(value)
        assert value["stage"] == "history" and value["detail"]
    return values


@pytest.mark.parametrize("created_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_dates_without_a_utc_equivalent_are_dead_letters_and_the_rest_is_stored(
    created_at: str,
) -> None:
    out = triage(
        [
            record(event(event_id="a"), 0),
            record(event(created_at=created_at), 1),
            record(event(event_id="b"), 2),
        ],
        100,
    )
    assert [m.event_id for m, _ in out.accepted] == ["a", "b"]
    (letter,) = letters_of(out)
    assert letter["reason"] == "invalid_timestamp" and letter["source"]["offset"] == 1
    assert "created_at" in letter["detail"]


def test_the_same_dates_just_inside_the_calendar_are_stored() -> None:
    out = triage(
        [
            record(event(event_id="a", created_at="0001-01-01T00:00:00-01:00")),
            record(event(event_id="b", created_at="9999-12-31T23:59:59+01:00")),
        ],
        100,
    )
    assert [m.created_at for m, _ in out.accepted] == [
        datetime(1, 1, 1, 1, 0),
        datetime(9999, 12, 31, 22, 59, 59),
    ]


def test_a_kafka_timestamp_in_year_10000() -> None:
    out = triage(
        [
            stamped(event(event_id="dated", created_at="2026-01-01T00:00:00Z"), YEAR_10000, 0),
            stamped(event(event_id="undated"), YEAR_10000, 1),
            stamped(b"{not json", YEAR_10000, 2),
            stamped(event(event_id="fine"), 1_767_225_600.0, 3),
        ],
        100,
    )
    assert [m.event_id for m, _ in out.accepted] == ["dated", "fine"]
    letters = letters_of(out)
    assert [(v["reason"], v["source"]["offset"]) for v in letters] == [
        ("invalid_timestamp", 1),
        ("invalid_json", 2),
    ]
    # RFC 3339 has no year 10000: the letter keeps the raw stamp instead.
    assert all(v["source"]["timestamp"] is None for v in letters)
    assert all(v["source"]["timestamp_ms"] == 253_402_300_800_000 for v in letters)


def test_a_session_end_at_the_calendar_edge_is_an_invalid_timestamp() -> None:
    end = {"event_id": "e", "tenant_id": "t", "user_id": "u", "conversation_id": "c"}
    for edge in ("0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59.999999-00:01"):
        with pytest.raises(InvalidEvent) as caught:
            parse_session_end(orjson.dumps({**end, "ended_at": edge}))
        assert caught.value.reason == "invalid_timestamp"
    assert parse_session_end(orjson.dumps({**end, "ended_at": "9999-12-31T23:59:59Z"}))


edge_dates = st.one_of(
    st.sampled_from([FIRST, LAST, datetime(1, 1, 1, 23, 59), datetime(9999, 12, 31)]),
    st.datetimes(min_value=FIRST, max_value=datetime(1, 1, 3)),
    st.datetimes(min_value=datetime(9999, 12, 29), max_value=LAST),
    st.datetimes(min_value=FIRST, max_value=LAST),
)
offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59)
fractions = st.sampled_from(["", ".0", ".5", ".999999", ".1234567891234"])


@given(moment=edge_dates, minutes=offsets, fraction=fractions)
@settings(max_examples=300, deadline=None)
def test_any_created_at_is_stored_in_utc_or_dead_lettered(
    moment: datetime, minutes: int, fraction: str
) -> None:
    text = rfc3339(moment, minutes, fraction)
    out = triage([record(event(created_at=text))], 100)
    if has_utc(moment.replace(microsecond=0), minutes):
        (stored, _), *_ = out.accepted
        assert stored.created_at.tzinfo is None
        assert not out.rejected
    else:
        assert not out.accepted
        assert [v["reason"] for v in letters_of(out)] == ["invalid_timestamp"]


@given(moment=edge_dates, minutes=offsets)
@settings(max_examples=200, deadline=None)
def test_any_ended_at_parses_or_is_an_invalid_timestamp(moment: datetime, minutes: int) -> None:
    end = {"event_id": "e", "tenant_id": 1, "user_id": "u", "conversation_id": "c"}
    raw = orjson.dumps({**end, "ended_at": rfc3339(moment, minutes)})
    if has_utc(moment.replace(microsecond=0), minutes):
        assert parse_session_end(raw).ended_at is not None
    else:
        with pytest.raises(InvalidEvent, match="no UTC equivalent") as caught:
            parse_session_end(raw)
        assert caught.value.reason == "invalid_timestamp"


kafka_stamps = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=YEAR_10000 - 2, max_value=YEAR_10000 + 2),
    st.sampled_from([-0.001, 0.0, YEAR_10000 - 0.001, YEAR_10000, 1e18, -1e18]),
)


@given(timestamp=kafka_stamps, dated=st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_kafka_timestamp(timestamp: float | None, dated: bool) -> None:
    fields = {"created_at": "2026-05-01T12:00:00Z"} if dated else {}
    out = triage([stamped(event(**fields), timestamp), stamped(b"[]", timestamp, 1)], 100)
    letters = letters_of(out)
    assert letters[-1]["reason"] == "not_an_object"
    usable = timestamp is None or timestamp < 0 or kafka_time(timestamp) is not None
    if dated or usable:
        assert len(out.accepted) == 1 and len(letters) == 1
    else:
        assert not out.accepted
        assert letters[0]["reason"] == "invalid_timestamp"


MAX = 64
numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from([0, -1, 2**63 - 1, 2**64 - 1, 10**127, 10**128]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
texts = st.one_of(
    st.text(max_size=MAX + 2),
    st.text(alphabet=st.sampled_from(" \t\n\u3000\u00a0\u2028\x00"), min_size=1, max_size=4),
    st.sampled_from(["x" * MAX, "x" * (MAX + 1), "😀" * MAX, "😀" * (MAX + 1), "\ud7ff" * 128]),
    st.integers(min_value=120, max_value=130).map(lambda n: "😀" * n),
)
fields = st.sampled_from(
    [
        "tenant_id",
        "user_id",
        "agent_id",
        "conversation_id",
        "role",
        "message_type",
        "content",
        "created_at",
        "metadata",
    ]
)
values = st.one_of(
    numbers, texts, st.none(), st.just([]), st.dictionaries(texts, numbers, max_size=3)
)


@st.composite
def poison(draw: st.DrawFn, index: int) -> bytes:
    """A message with some fields set to numbers and strings at their limits, or raw bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=40))
    base = orjson.loads(event(event_id=f"e{index}", created_at="2026-01-01T00:00:00Z"))
    for name, value in draw(st.lists(st.tuples(fields, values), max_size=3)):
        base[name] = value
    if draw(st.booleans()):
        base["event_id"] = f"{index}:{draw(texts)}"  # unique in the batch, at any length
    if draw(st.booleans()):
        base["created_at"] = rfc3339(draw(edge_dates), draw(offsets))
    return json.dumps(base, ensure_ascii=draw(st.booleans())).encode()  # any size of integer


@given(st.data(), st.lists(kafka_stamps, min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_no_batch_can_make_triage_raise(data: st.DataObject, stamps: list[float | None]) -> None:
    records = [stamped(data.draw(poison(i)), ts, i) for i, ts in enumerate(stamps)]
    out = triage(records, MAX)
    letters = letters_of(out)
    # Every record is accounted for exactly once (event ids are unique per batch here).
    assert len(out.accepted) + len(letters) + out.dropped == len(records)
    offsets_seen = [r.offset for _, r in out.accepted] + [v["source"]["offset"] for v in letters]
    assert len(set(offsets_seen)) == len(offsets_seen)
    assert {v["reason"] for v in letters} <= KNOWN_REASONS
    for stored, _ in out.accepted:
        assert stored.created_at.tzinfo is None
        assert len(stored.content) <= MAX
        assert 1 <= len(stored.event_id) <= 128 and stored.token_count >= 0
