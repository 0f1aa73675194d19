"""Which engine answers a read: the replica, but the primary for a user just written for."""

from __future__ import annotations

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


def test_the_oldest_writes_are_forgotten_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reads, "MAX_TRACKED", 2)
    primary, replica = engines()
    router = Reads(primary, replica, sticky_seconds=3600)
    for user in ("u1", "u2", "u3"):
        router.wrote("t1", user)
    assert router.engine("t1", "u1") is replica
    assert router.engine("t1", "u2") is primary and router.engine("t1", "u3") is primary
