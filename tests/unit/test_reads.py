"""Which engine answers a read: the replica, but the primary for a user just written for."""

from __future__ import annotations

import math
import time

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memstream.store import reads
from memstream.store.reads import Reads


def engines() -> tuple[AsyncEngine, AsyncEngine]:
    return (
        create_async_engine("sqlite+aiosqlite:///primary.db"),
        create_async_engine("sqlite+aiosqlite:///replica.db"),
    )


def test_reads_go_to_the_replica_until_a_user_is_written_for() -> None:
    primary, replica = engines()
    router = Reads(primary, replica, sticky_seconds=3600)
    assert router.engine("t1", "u1") is replica
    router.wrote("t1", "u1")
    assert router.engine("t1", "u1") is primary
    assert router.engine("t1", "u2") is replica
    assert router.engine("t2", "u1") is replica


def test_a_write_of_unknown_users_sends_the_whole_tenant_to_the_primary() -> None:
    primary, replica = engines()
    router = Reads(primary, replica, sticky_seconds=3600)
    router.wrote("t1")
    assert router.engine("t1", "anyone") is primary
    assert router.engine("t2", "anyone") is replica


def test_reads_return_to_the_replica_once_the_sticky_time_is_over() -> None:
    primary, replica = engines()
    router = Reads(primary, replica, sticky_seconds=0)
    router.wrote("t1", "u1")
    router.wrote("t1")
    assert router.engine("t1", "u1") is replica


def test_without_a_replica_every_read_goes_to_the_primary() -> None:
    primary, _ = engines()
    router = Reads(primary, sticky_seconds=3600)
    router.wrote("t1", "u1")
    assert router.engine("t1", "u1") is primary
    assert router.engine("t1", "u2") is primary


def test_the_primarys_own_read_engine_answers_every_read_and_never_lags() -> None:
    primary, own_reads = engines()
    lag = reads.ReplicaLag(own_reads, max_seconds=5, every=1)
    router = Reads(primary, own_reads, sticky_seconds=3600, lag=lag, replicated=False)
    router.wrote("t1", "u1")
    assert router.engine("t1", "u1") is own_reads
    assert router.current() is own_reads
    assert router.lag is None and not router.replicated


def test_the_oldest_writes_are_forgotten_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reads, "MAX_TRACKED", 2)
    primary, replica = engines()
    router = Reads(primary, replica, sticky_seconds=3600)
    for user in ("u1", "u2", "u3"):
        router.wrote("t1", user)
    assert router.engine("t1", "u1") is replica
    assert router.engine("t1", "u2") is primary and router.engine("t1", "u3") is primary


def test_the_lag_is_the_slowest_sources_and_unknown_when_one_is_not_replicating() -> None:
    assert reads.lag_of([{"Seconds_Behind_Master": 0}]) == 0
    assert reads.lag_of([{"Seconds_Behind_Source": 3}, {"Seconds_Behind_Source": 7}]) == 7
    # The server's NULL: the applier or the receiver is stopped.
    assert reads.lag_of([{"Seconds_Behind_Master": 2}, {"Seconds_Behind_Master": None}]) is None
    assert reads.lag_of([]) is None  # not a replica at all


def test_a_lagging_replica_sends_every_read_to_the_primary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    primary, replica = engines()
    lag = reads.ReplicaLag(replica, max_seconds=5, every=1)
    router = Reads(primary, replica, sticky_seconds=3600, lag=lag)
    assert router.engine("t1", "u1") is primary  # never checked: unknown
    lag.record(5)
    assert router.engine("t1", "u1") is replica and router.current() is replica
    assert reads.ON_PRIMARY._value.get() == 0
    lag.record(6)
    assert router.engine("t1", "u1") is primary and router.current() is primary
    assert reads.ON_PRIMARY._value.get() == 1 and reads.LAG._value.get() == 6
    lag.record(None)
    assert router.current() is primary
    # A reading older than two check intervals and a check's timeout is stale.
    lag.record(0)
    now = time.monotonic()
    assert lag.usable(now + 1.9 + reads.CHECK_TIMEOUT_SECONDS)
    assert not lag.usable(now + 2.1 + reads.CHECK_TIMEOUT_SECONDS)


async def test_a_check_that_fails_leaves_the_lag_unknown() -> None:
    # SQLite has no replication status: the statement fails as on a server refusing it.
    replica = create_async_engine("sqlite+aiosqlite://")
    lag = reads.ReplicaLag(replica, max_seconds=5, every=1)
    lag.record(0)
    assert await lag.check() is None
    assert lag.seconds is None and not lag.usable()
    assert math.isnan(reads.LAG._value.get())
    await replica.dispose()


def test_without_a_replica_there_is_no_lag_to_watch() -> None:
    primary, _ = engines()
    lag = reads.ReplicaLag(primary, max_seconds=5, every=1)
    assert Reads(primary, sticky_seconds=0, lag=lag).lag is None
