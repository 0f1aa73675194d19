"""The ``memory_change`` rows (the outbox of ``memory-changed``) and the ``memory_link`` rows,
written in the caller's transaction, so that a change and its record commit together."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from sqlalchemy import Insert, Table, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.store.database import in_lists
from memstream.store.schema import memory_change, memory_link
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
