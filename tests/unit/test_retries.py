"""Retry scheduling of the conflict and persist stages."""

from __future__ import annotations

from memstream.longterm.backoff import RetryRecord, backoff, next_try


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff(a) for a in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff(30) == 300
    assert backoff(2, base=0.1) == 0.2


def test_next_try_until_attempts_are_spent() -> None:
    record = {"session": {"tenant_id": "t"}, "store": [], "expire": ["x"]}
    first = next_try("persist", record, 0, "ConnectError()", max_attempts=3, now=100.0)
    assert first is not None and first.attempt == 1 and first.not_before == 101.0
    second = next_try("persist", record, first.attempt, "e", max_attempts=3, now=200.0)
    assert second is not None and second.attempt == 2 and second.not_before == 202.0
    assert next_try("persist", record, second.attempt, "e", max_attempts=3) is None


def test_retry_record_round_trip() -> None:
    record = RetryRecord("conflict", {"a": [1, "b"]}, 2, 12.5, "boom")
    assert RetryRecord.decode(record.encode()) == record
