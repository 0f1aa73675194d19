"""What a forget covers, decided with no IO: origins, partition ends, the per-process copy,
and the origin a record keeps through the retry tiers and its dead letter."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson

from memstream.broker.topics import topic_configs
from memstream.events.deadletter import SourceRecord, dead_letter, read_letter
from memstream.events.origin import ORIGIN_HEADER, Origin, origin_in
from memstream.failure.tiers import RetryPolicy, RetryRecord, next_try
from memstream.longterm.payloads import Session, dumps, session_of
from memstream.settings import Settings
from memstream.store.forgets import ForgetSet, ForgetStore, Forgotten, subject_of

MW, SE = "p.message-written", "p.session-ended"


def row(n: int, user: str, offsets: dict[str, dict[str, int]], purge: bool = True) -> Any:
    return SimpleNamespace(
        id=n, tenant_id="t1", user_id=user, purge_history=purge, offsets=offsets,
        message_id=10 * n, change_seq=100 * n,
    )  # fmt: skip


def test_an_origin_round_trips_and_garbage_is_none() -> None:
    origin = Origin("memory.session-ended", 3, 41)
    assert Origin.decode(origin.encode()) == origin
    assert origin_in([("x", b"1"), (ORIGIN_HEADER, origin.encode())]) == origin
    for junk in (None, b"", b"1:2", b"a:b:topic", b"1:2:"):
        assert Origin.decode(junk) is None
    assert origin_in(None) is None


def test_before_the_forget_is_below_the_end_each_partition_had() -> None:
    forgotten = Forgotten()
    forgotten.add({MW: {"0": 5, "1": 0}, SE: {"0": 2}}, purge=False, message_id=7)
    assert forgotten.before(Origin(MW, 0, 4))
    assert not forgotten.before(Origin(MW, 0, 5))  # the first record after it
    assert not forgotten.before(Origin(MW, 1, 0))  # the partition was empty then
    assert not forgotten.before(Origin(MW, 2, 0))  # a partition added since
    assert forgotten.before(Origin(SE, 0, 1))
    assert forgotten.before(None)  # work from earlier versions, which carried no origin
    # Only a forget that purged the history covers the history.
    assert not forgotten.before(Origin(MW, 0, 4), history=True)
    forgotten.add({MW: {"0": 3}}, purge=True, message_id=2)
    assert forgotten.before(Origin(MW, 0, 2), history=True)
    assert not forgotten.before(Origin(MW, 0, 3), history=True)
    assert forgotten.before(Origin(MW, 0, 4))  # the later ends still hold for memories
    assert forgotten.message_id == 7


def test_the_copy_applies_each_row_once_and_marks_what_came_since() -> None:
    copy = ForgetSet(ForgetStore(None))  # type: ignore[arg-type]
    copy.apply([row(2, "u1", {MW: {"0": 5}})])
    mark = len(copy._log)
    # A row with a lower id shows up late (its transaction committed after the higher one's).
    copy.apply([row(1, "u2", {MW: {"0": 1}}, purge=False), row(2, "u1", {MW: {"0": 5}})])
    assert copy.since(mark) == {("t1", "u2")}
    assert copy.since(mark, history=True) == set()
    assert copy.since(0) == {("t1", "u1"), ("t1", "u2")}
    assert copy.before("t1", "u1", Origin(MW, 0, 4), history=True)
    assert not copy.before("t1", "u3", Origin(MW, 0, 0))
    assert copy.of("t1", "u1") is not None and copy.of("t1", "u1").change_seq == 200  # type: ignore[union-attr]
    assert copy.last_id == 2


def test_the_subject_of_a_public_event_and_of_a_stage_record() -> None:
    event = {"tenant_id": 7, "user_id": "u1", "conversation_id": "c", "content": "hi"}
    assert subject_of(orjson.dumps(event)) == ("7", "u1", None)
    session = Session("t1", "u1", "a1", "c1", "end-c1", SE, 2, 9)
    assert subject_of(dumps(session=session, candidates=[])) == ("t1", "u1", Origin(SE, 2, 9))
    assert session_of(orjson.loads(dumps(session=session))).origin == Origin(SE, 2, 9)
    # A session written by an earlier version has no origin fields and still reads.
    old = {"session": {k: v for k, v in vars_of(session).items() if not k.startswith("origin")}}
    assert session_of(old).origin is None
    for junk in (b"not json", b"[1]", b'{"tenant_id": "t1"}', None):
        assert subject_of(junk) is None


def vars_of(session: Session) -> dict[str, Any]:
    return dict(orjson.loads(orjson.dumps(session)))


def test_a_retry_and_its_dead_letter_keep_the_first_records_origin() -> None:
    first = SourceRecord(SE, 1, 12, 1.0, b"c1", b"{}")
    retry = next_try(
        "session", SE, b"c1", b"{}", None, "boom", RetryPolicy(), now=10.0, origin=first.first
    )
    assert retry is not None
    back = RetryRecord.decode(retry.encode())
    assert back.origin == Origin(SE, 1, 12)
    assert (ORIGIN_HEADER, Origin(SE, 1, 12).encode()) in back.headers()
    # Sent back, it sits elsewhere on the topic, but stems from where it first was.
    again = SourceRecord(SE, 1, 80, 1.0, b"c1", b"{}", origin=origin_in(back.headers()))
    assert again.first == Origin(SE, 1, 12)
    letter = read_letter(0, 0, b"c1", dead_letter("retries_exhausted", "x", "session", again).value)
    assert letter.first == Origin(SE, 1, 12)
    plain = read_letter(0, 1, None, dead_letter("invalid_json", "x", "history", first).value)
    assert plain.origin is None and plain.first == Origin(SE, 1, 12)


def test_memory_changed_keeps_records_for_the_configured_retention_only() -> None:
    settings = Settings(changes_retention_hours=2)
    assert topic_configs(settings, "memory-changed") == {"retention.ms": str(2 * 3600 * 1000)}
    assert topic_configs(settings, "message-written") == {}
