"""Conversations whose cached history may have missed a write, recorded in the database.

A cache update that fails may have written part of a batch, or none of it, to keys that stay:
appends go to existing keys only, so such a key would keep its gap until it expires. The
history stage therefore records the batch's conversations here before it acknowledges the
batch, and drops their keys once Redis answers (``RedisCache.drop_stale``). Being in the
record, a mark survives a crash, and any worker drops it. Each mark has a version that every
new failure increments, and a mark is cleared only at the version that was read before its
key was dropped: a failure recorded meanwhile keeps its mark for the next round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy import BigInteger, Executable, and_, delete, literal_column, or_, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import cache_rebuild

Conversation = tuple[str, str]  # (tenant id, conversation id)
Mark = tuple[str, str, int]  # (tenant id, conversation id, version)


class CacheRebuilds:
    """The ``cache_rebuild`` marks of one database."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def mark(self, conversations: Iterable[Conversation]) -> None:
        """Record that these conversations' cached copies must be dropped."""
        now = datetime.now(UTC).replace(tzinfo=None)
        rows = [
            {"tenant_id": tenant, "conversation_id": conversation, "version": 1, "marked_at": now}
            for tenant, conversation in sorted(set(conversations))
        ]
        if not rows:
            return
        # A literal, not a parameter: aiomysql's executemany cannot take one in the update part.
        bumped = cache_rebuild.c.version + literal_column("1", BigInteger())
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            ins = sqlite.insert(cache_rebuild)
            stmt = ins.on_conflict_do_update(
                index_elements=["tenant_id", "conversation_id"],
                set_={"version": bumped, "marked_at": ins.excluded.marked_at},
            )
        else:
            mins = mysql.insert(cache_rebuild)
            stmt = mins.on_duplicate_key_update(version=bumped, marked_at=mins.inserted.marked_at)
        async with self._engine.begin() as conn:
            await conn.execute(stmt, rows)

    async def marked(self, limit: int = 500) -> list[Mark]:
        """Up to ``limit`` marks, oldest first."""
        query = (
            select(
                cache_rebuild.c.tenant_id, cache_rebuild.c.conversation_id, cache_rebuild.c.version
            )
            .order_by(cache_rebuild.c.marked_at)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(row.tenant_id, row.conversation_id, int(row.version)) for row in rows]

    async def clear(self, marks: Sequence[Mark]) -> None:
        """Clear marks at the version read; a mark incremented since stays."""
        if not marks:
            return
        matches = [
            and_(
                cache_rebuild.c.tenant_id == tenant,
                cache_rebuild.c.conversation_id == conv,
                cache_rebuild.c.version == version,
            )
            for tenant, conv, version in marks
        ]
        async with self._engine.begin() as conn:
            await conn.execute(delete(cache_rebuild).where(or_(*matches)))
