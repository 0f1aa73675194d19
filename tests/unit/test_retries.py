"""Retries of stage records: what counts as an outage, backoff tiers, and the retry horizon."""

from __future__ import annotations

import orjson
import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, RecordTooLargeError
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from memstream.errors import (
    HistoryBehind,
    InvalidEvent,
    MemstreamError,
    Outage,
    ProviderUnavailable,
    Refused,
    Rejected,
    ServiceUnavailable,
)
from memstream.failure.classify import failure_reason, is_outage
from memstream.failure.tiers import Failing, RetryPolicy, RetryRecord, next_try, tier_topic
from memstream.settings import Settings
from memstream.topology import REDRIVE_TOPICS, internal_topics
from memstream_client.contract import errors as client_errors


def tries(policy: RetryPolicy) -> list[float]:
    """Seconds after its first failure at which a record that never succeeds is tried again."""
    times: list[float] = []
    failing, now = None, 0.0
    while (
        retry := next_try("persist", "t", None, b"v", failing, "e", policy, now=now)
    ) is not None:
        failing, now = retry.failing, retry.not_before
        times.append(now)
    return times


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy()
    assert [policy.delay(t) for t in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert policy.delay(30) == 300
    assert RetryPolicy(base=0.1).delay(2) == 0.2


def test_one_tier_per_distinct_delay() -> None:
    policy = RetryPolicy(base=1, cap=300)
    assert policy.tiers == 10
    assert [policy.delay(t) for t in range(1, 11)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert [policy.tier_of(a) for a in (1, 2, 10, 11, 50)] == [1, 2, 10, 10, 10]
    assert RetryPolicy(base=5, cap=1).tiers == 1
    assert RetryPolicy(base=1, cap=4).tiers == 3
    tiers = [n for n in internal_topics(Settings()) if n.startswith("retry-")]
    assert tiers == [tier_topic(t) for t in range(1, 11)]


def test_the_default_horizon_rides_out_a_fifteen_minute_outage() -> None:
    policy = RetryPolicy.from_settings(Settings())
    times = tries(policy)
    # A try comes at most one capped delay after any moment of the outage ...
    assert any(15 * 60 <= t <= 15 * 60 + policy.cap for t in times)
    assert max(b - a for a, b in zip([0.0, *times], times, strict=False)) <= policy.cap
    # ... and the record is only given up once it has been failing for the whole horizon.
    assert policy.horizon >= 15 * 60
    assert times[-1] >= policy.horizon


def test_horizon_and_cap_are_settings() -> None:
    policy = RetryPolicy.from_settings(
        Settings(retry_base_seconds=0.5, retry_max_delay_seconds=2, retry_horizon_seconds=10)
    )
    times = tries(policy)
    assert times[:4] == [0.5, 1.5, 3.5, 5.5]
    assert times[-1] >= 10 and times[-2] < 10


def test_next_try_counts_attempts_and_keeps_the_first_failure() -> None:
    policy = RetryPolicy(base=1, cap=8, horizon=100)
    first = next_try("persist", "p.lt-persist", b"k", b"v", None, "ConnectError()", policy, now=50)
    assert first is not None
    assert first.failing == Failing(1, 50) and first.not_before == 51
    assert (first.topic, first.key, first.value, first.error) == (
        "p.lt-persist",
        b"k",
        b"v",
        "ConnectError()",
    )
    later = next_try("persist", "t", None, None, Failing(6, 50), "e", policy, now=120)
    assert later is not None and later.failing == Failing(7, 50) and later.not_before == 128
    assert next_try("persist", "t", None, None, Failing(7, 50), "e", policy, now=150) is None
    assert next_try("persist", "t", None, None, None, "e", RetryPolicy(horizon=0), now=1) is None
    long = next_try("s", "t", None, None, None, "x" * 900, policy, now=1)
    assert long is not None and len(long.error) == 500


def test_a_retry_goes_back_with_the_kafka_time_of_its_first_record() -> None:
    # The session stage orders a user's sessions by it: a retried session end keeps its place.
    policy = RetryPolicy(base=1, cap=8, horizon=100)
    first = next_try(
        "session", "p.session-ended", b"c", b"v", None, "e", policy, now=50, timestamp=42.5
    )
    assert first is not None and first.timestamp == 42.5
    assert RetryRecord.decode(first.encode()).timestamp == 42.5
    older = orjson.loads(first.encode())
    del older["timestamp"]  # a record written before the time was kept
    assert RetryRecord.decode(orjson.dumps(older)).timestamp is None
    assert RetryRecord.decode(orjson.dumps({**older, "timestamp": -1})).timestamp is None


@pytest.mark.parametrize("key", [None, b"c1", b"\xff\x00"])
@pytest.mark.parametrize("value", [None, b"", b'{"a": 1}', b"\xfe\xff"])
def test_retry_record_round_trip(key: bytes | None, value: bytes | None) -> None:
    record = RetryRecord("conflict", "p.lt-conflict", key, value, Failing(2, 12.5), 14.5, "boom")
    assert RetryRecord.decode(record.encode()) == record


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"\xff",
        b"[1]",
        b'{"garbage": 1}',
        b'{"stage": "s", "topic": "", "key": null, "value": null, "attempts": 1, "since": 1,'
        b' "not_before": 2, "error": ""}',
        b'{"stage": "s", "topic": "t", "key": "%%%", "value": null, "attempts": 1, "since": 1,'
        b' "not_before": 2, "error": ""}',
        b'{"stage": "s", "topic": "t", "key": null, "value": null, "attempts": 0, "since": 1,'
        b' "not_before": 2, "error": ""}',
        b'{"stage": 1, "topic": "t", "key": null, "value": null, "attempts": 1, "since": 1,'
        b' "not_before": 2, "error": ""}',
    ],
)
def test_anything_else_is_not_a_retry_record(raw: bytes | None) -> None:
    with pytest.raises(ValueError, match="not a retry record"):
        RetryRecord.decode(raw)


def test_retry_state_travels_in_headers() -> None:
    failing = Failing(3, 1767225600.125)
    assert Failing.from_headers(failing.headers()) == failing
    assert Failing.from_headers([("other", b"x"), *failing.headers()]) == failing
    assert Failing.from_headers(None) is None
    assert Failing.from_headers([("memstream-retry-attempt", b"two")]) is None
    assert (
        Failing.from_headers([("memstream-retry-attempt", b"1"), ("memstream-retry-since", b"nan")])
        is None
    )


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (InvalidEvent("invalid_payload", "x."), "invalid_payload"),
        (InvalidEvent("invalid_timestamp", "x."), "invalid_timestamp"),
        (Refused(), "rejected_by_database"),
        (IntegrityError("insert", {}, Exception("duplicate")), "rejected_by_database"),
        (DataError("insert", {}, Exception("too long")), "rejected_by_database"),
        (OperationalError("select", {}, Exception("gone away")), None),
        (ProviderUnavailable("MemOS is down"), None),
        (HistoryBehind("not stored yet"), None),
        (ServiceUnavailable("no broker"), None),
        (Outage("any outage"), None),
        (KafkaTimeoutError(), None),
        (ConnectionRefusedError(), None),
        (TimeoutError(), None),
        (KafkaConnectionError(), None),
        (RecordTooLargeError(), "stage_error"),
        (KeyError("session"), "stage_error"),
        (ValueError("bad"), "stage_error"),
    ],
)
def test_failure_reasons(exc: Exception, reason: str | None) -> None:
    assert failure_reason(exc) == reason


def test_outages_and_rejections_are_each_one_base() -> None:
    # The failure policy asks one question of memstream's own errors.
    for outage in (ServiceUnavailable, HistoryBehind, ProviderUnavailable):
        assert issubclass(outage, Outage) and not issubclass(outage, Rejected)
        assert is_outage(outage("down"))
    for rejected in (InvalidEvent, Refused):
        assert issubclass(rejected, Rejected) and not issubclass(rejected, Outage)
    assert not is_outage(Refused()) and not is_outage(IntegrityError("insert", {}, Exception()))
    assert issubclass(Outage, MemstreamError) and issubclass(Rejected, MemstreamError)
    # The client's are the same classes.
    assert client_errors.Outage is Outage and client_errors.Rejected is Rejected


def test_every_topic_a_stage_reads_can_be_redriven() -> None:
    from memstream.streams.topics import stage_inputs

    settings = Settings()
    assert set(stage_inputs) == {settings.topic(name) for name in REDRIVE_TOPICS}
