"""Processed-message marks: MD5 of ``role:content`` per conversation, living seven days."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Executable, delete, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import processed_mark as t

MARK_TTL = timedelta(days=7)


def mark_of(role: str, content: str) -> str:
    return hashlib.md5(f"{role}:{content}".encode(), usedforsecurity=False).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class MarkStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def present(self, tenant_id: str, conversation_id: str, marks: Iterable[str]) -> set[str]:
        """The marks among ``marks`` recorded and not yet expired."""
        wanted = sorted(set(marks))
        if not wanted:
            return set()
        found: set[str] = set()
        async with self._engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                query = select(t.c.mark).where(
                    t.c.tenant_id == tenant_id,
                    t.c.conversation_id == conversation_id,
                    t.c.mark.in_(wanted[start : start + 500]),
                    t.c.expires_at > _now(),
                )
                found |= set((await conn.execute(query)).scalars())
        return found

    async def record(self, tenant_id: str, conversation_id: str, marks: Iterable[str]) -> None:
        """Record marks (or extend them) for seven days from now."""
        expires = _now() + MARK_TTL
        rows = [
            {
                "tenant_id": tenant_id,
                "conversation_id": conversation_id,
                "mark": m,
                "expires_at": expires,
            }
            for m in sorted(set(marks))
        ]
        if not rows:
            return
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            ins = sqlite.insert(t)
            stmt = ins.on_conflict_do_update(
                index_elements=["tenant_id", "conversation_id", "mark"],
                set_={"expires_at": ins.excluded.expires_at},
            )
        else:
            mins = mysql.insert(t)
            stmt = mins.on_duplicate_key_update(expires_at=mins.inserted.expires_at)
        async with self._engine.begin() as conn:
            await conn.execute(stmt, rows)

    async def prune(self) -> int:
        """Delete expired marks; answers how many."""
        async with self._engine.begin() as conn:
            result = await conn.execute(delete(t).where(t.c.expires_at <= _now()))
        return int(result.rowcount or 0)
