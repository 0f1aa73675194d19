"""The ``memory_change`` rows (the outbox of ``memory-changed``) and the ``memory_link`` rows,
written in the caller's transaction, so that a change and its record commit together."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Insert, Row, Table, delete, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.store.database import in_lists
from memstream.store.schema import change_relay, memory_change, memory_link
from memstream_client.contract.changes import Change, value_of
from memstream_client.contract.topics import MEMORY_CHANGED

# The topic of the default prefix (``memory.``): what a store built without settings writes to.
DEFAULT_TOPIC = f"memory.{MEMORY_CHANGED}"


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def insert_ignoring(conn: AsyncConnection, table: Table, key: str) -> Insert:
    """An INSERT that leaves a row whose unique key (``key`` among its columns) is held as it is."""
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    stmt = mysql.insert(table)
    return stmt.on_duplicate_key_update({key: stmt.inserted[key]})


class ChangeOutbox:
    """Where one deployment records its changes: the full ``memory-changed`` topic name, and an
    event the relay of the same process waits on, so a change goes out without a poll's wait."""

    def __init__(self, topic: str = DEFAULT_TOPIC) -> None:
        self.topic = topic
        self.written = asyncio.Event()

    async def write(self, conn: AsyncConnection, changes: Sequence[Change]) -> None:
        """Record ``changes`` (one recorded already is left as it is) and the links of the
        added memories to those they supersede."""
        if not changes:
            return
        rows = [
            {
                "change_id": c.change_id,
                "topic": self.topic,
                "tenant_id": c.tenant_id,
                "user_id": c.user_id,
                "provider": c.provider,
                "memory_id": c.memory_id,
                "change": c.change,
                "cause": c.cause,
                "conversation_id": c.conversation_id,
                "payload": orjson.dumps(value_of(c)).decode(),
                "content": c.content,
                "changed_at": _naive(c.changed_at),
                "published_at": None,
                "traceparent": c.trace,
            }
            for c in changes
        ]
        await conn.execute(insert_ignoring(conn, memory_change, "change_id"), rows)
        links = [
            {
                "tenant_id": c.tenant_id,
                "memory_id": c.memory_id,
                "supersedes_id": old,
                "user_id": c.user_id,
                "provider": c.provider,
                "created_at": _naive(c.changed_at),
            }
            for c in changes
            if c.change == "added"
            for old in dict.fromkeys(c.supersedes)
        ]
        if links:
            await conn.execute(insert_ignoring(conn, memory_link, "supersedes_id"), links)
        self.written.set()

    async def erase(self, conn: AsyncConnection, tenant_id: str, memory_ids: Sequence[str]) -> None:
        """Drop the text of these memories' changes not published yet: a user who deleted a
        memory expects its words gone, from the outbox too."""
        for chunk in in_lists(memory_ids):
            await conn.execute(
                update(memory_change)
                .where(memory_change.c.tenant_id == tenant_id, memory_change.c.memory_id.in_(chunk))
                .values(content=None)
            )


async def unpublished(engine: AsyncEngine, topic: str, limit: int) -> list[Row[Any]]:
    """The topic's oldest ``limit`` rows not yet published: (seq, tenant, user, change,
    payload, content, traceparent)."""
    query = (
        select(
            memory_change.c.seq,
            memory_change.c.tenant_id,
            memory_change.c.user_id,
            memory_change.c.change,
            memory_change.c.payload,
            memory_change.c.content,
            memory_change.c.traceparent,
        )
        .where(memory_change.c.topic == topic, memory_change.c.published_at.is_(None))
        .order_by(memory_change.c.seq)
        .limit(limit)
    )
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())


async def mark_published(
    engine: AsyncEngine,
    topic: str,
    seqs: Sequence[int],
    forgotten: Mapping[tuple[str, str], int],
    now: datetime,
) -> None:
    """Published: the rows' text is no longer kept. A forgotten user's published rows up to
    the seq of their ``forgotten`` change are deleted (each user's in ``forgotten``)."""
    async with engine.begin() as conn:
        await conn.execute(
            update(memory_change)
            .where(memory_change.c.seq.in_(seqs))
            .values(published_at=now, content=None)
        )
        for (tenant_id, user_id), last in forgotten.items():
            await conn.execute(
                delete(memory_change).where(
                    memory_change.c.tenant_id == tenant_id,
                    memory_change.c.user_id == user_id,
                    memory_change.c.topic == topic,
                    memory_change.c.seq <= last,
                    memory_change.c.published_at.is_not(None),
                )
            )


async def take_lease(
    engine: AsyncEngine, topic: str, owner: str, now: datetime, until: datetime
) -> bool:
    """Take or renew the topic's relay lease (``change_relay``) until ``until``; False while
    another owner holds it unexpired."""
    lease = change_relay.c
    async with engine.begin() as conn:
        first = {"topic": topic, "owner": owner, "expires_at": until}
        await conn.execute(insert_ignoring(conn, change_relay, "topic"), [first])
        taken = await conn.execute(
            update(change_relay)
            .where(lease.topic == topic, (lease.owner == owner) | (lease.expires_at < now))
            .values(owner=owner, expires_at=until)
        )
    return bool(taken.rowcount)


async def give_up_lease(engine: AsyncEngine, topic: str, owner: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            delete(change_relay).where(change_relay.c.topic == topic, change_relay.c.owner == owner)
        )
