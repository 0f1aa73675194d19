"""The queries behind ``/v1/stats``: one tenant's messages, memories and searches, counted in
the database. Memories are counted wherever they live: the built-in store's
``long_term_memory`` and the ledger of what memstream wrote to MemOS and Mem0
(``provider_memory``). Every query is a GROUP BY on an index that covers it
(``ix_message_tenant_time``, ``ix_memory_tenant_time``, ``ix_memory_tenant_cube``,
``ix_memory_cube_time``, their ``ix_provider_memory_*`` twins, the primary key of
``search_stat``), so it reads one tenant's index range and never a table row. Time buckets are
truncated in the database (``DATE_FORMAT`` on MySQL/MariaDB, ``strftime`` on SQLite)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Row, Table, func, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import (
    conversation_message,
    long_term_memory,
    provider_memory,
    search_stat,
)
from memstream.store.searchstats import LATENCY_BUCKETS

Bucket = Literal["hour", "day"]
_FORMAT = {"hour": "%Y-%m-%d %H:00:00", "day": "%Y-%m-%d 00:00:00"}
# Each table of memories with the provider its rows live in.
_STORES: tuple[tuple[Table, ColumnElement[Any]], ...] = (
    (long_term_memory, literal("MYSQL")),
    (provider_memory, provider_memory.c.provider),
)


def _truncated(engine: AsyncEngine, column: Any, bucket: Bucket) -> ColumnElement[Any]:
    if engine.dialect.name == "sqlite":
        return func.strftime(_FORMAT[bucket], column)
    return func.date_format(column, _FORMAT[bucket])


async def overview(engine: AsyncEngine, tenant_id: str) -> tuple[int, int, list[Row[Any]]]:
    """The tenant's messages, its conversations, and its live memories counted by (provider,
    cube, type, agent)."""
    messages = conversation_message
    async with engine.connect() as conn:
        counted = (
            await conn.execute(
                select(func.count(), func.count(func.distinct(messages.c.conversation_id))).where(
                    messages.c.tenant_id == tenant_id
                )
            )
        ).one()
        groups: list[Row[Any]] = []
        for table, provider in _STORES:
            found = await conn.execute(
                select(
                    provider, table.c.cube_id, table.c.memory_type, table.c.agent_id, func.count()
                )
                .where(table.c.tenant_id == tenant_id, table.c.deleted_at.is_(None))
                .group_by(provider, table.c.cube_id, table.c.memory_type, table.c.agent_id)
            )
            groups += found.all()
    return int(counted[0]), int(counted[1]), groups


async def created(
    engine: AsyncEngine, tenant_id: str, start: datetime, end: datetime, bucket: Bucket
) -> tuple[list[Row[Any]], list[Row[Any]]]:
    """Memories created in ``[start, end)`` by (bucket, type), and messages stored by bucket."""
    messages = conversation_message
    memories: list[Row[Any]] = []
    async with engine.connect() as conn:
        for table, _ in _STORES:
            at = _truncated(engine, table.c.created_at, bucket)
            found = await conn.execute(
                select(at, table.c.memory_type, func.count())
                .where(
                    table.c.tenant_id == tenant_id,
                    table.c.created_at >= start,
                    table.c.created_at < end,
                )
                .group_by(at, table.c.memory_type)
            )
            memories += found.all()
        at = _truncated(engine, messages.c.created_at, bucket)
        stored = await conn.execute(
            select(at, func.count())
            .where(
                messages.c.tenant_id == tenant_id,
                messages.c.created_at >= start,
                messages.c.created_at < end,
            )
            .group_by(at)
        )
        return memories, list(stored.all())


async def cube(
    engine: AsyncEngine, tenant_id: str, cube_id: str, newest: int
) -> tuple[list[Row[Any]], list[Row[Any]]]:
    """One cube's live memories counted by (type, importance), and its ``newest`` newest
    (id, provider, user, agent, type, content, importance, created_at), newest first."""
    groups: list[Row[Any]] = []
    rows: list[Row[Any]] = []
    async with engine.connect() as conn:
        for table, provider in _STORES:
            live = (
                table.c.tenant_id == tenant_id,
                table.c.cube_id == cube_id,
                table.c.deleted_at.is_(None),
            )
            found = await conn.execute(
                select(table.c.memory_type, table.c.importance, func.count())
                .where(*live)
                .group_by(table.c.memory_type, table.c.importance)
            )
            groups += found.all()
            key = table.c.id if table is long_term_memory else table.c.memory_id
            found = await conn.execute(
                select(
                    key.label("id"),
                    provider.label("provider"),
                    table.c.user_id,
                    table.c.agent_id,
                    table.c.memory_type,
                    table.c.content,
                    table.c.importance,
                    table.c.created_at,
                )
                .where(*live)
                .order_by(table.c.created_at.desc(), key.desc())
                .limit(newest)
            )
            rows += found.all()
    return groups, sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)[:newest]


async def searches(
    engine: AsyncEngine, tenant_id: str, start: datetime, end: datetime, bucket: Bucket
) -> list[Row[Any]]:
    """Load-path searches by bucket: (bucket, searches, hits, then the latency histogram's
    counts). Minute rows are whole: a bucket holds the minutes that start in ``[start, end)``."""
    at = _truncated(engine, search_stat.c.bucket_start, bucket)
    query = (
        select(
            at,
            func.sum(search_stat.c.searches),
            func.sum(search_stat.c.hits),
            *(func.sum(search_stat.c[name]) for name in LATENCY_BUCKETS),
        )
        .where(
            search_stat.c.tenant_id == tenant_id,
            search_stat.c.bucket_start >= start,
            search_stat.c.bucket_start < end,
        )
        .group_by(at)
    )
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())
