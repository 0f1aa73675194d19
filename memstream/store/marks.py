"""Processed-message marks: MD5 of ``role:content`` per conversation, living seven days.

Expired marks are ignored when read and deleted by ``prune``, which ``record`` runs at most
once per ``prune_every`` seconds in a process, in short chunks so that no transaction holds
many rows locked; a backlog larger than one round is taken up again on the next ``record``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Executable, Integer, delete, literal_column, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import processed_mark

log = logging.getLogger(__name__)

MARK_TTL = timedelta(days=7)
PRUNE_EVERY_SECONDS = 3600.0
PRUNE_CHUNK = 5000  # rows per DELETE
PRUNE_ROUND = 20  # DELETEs per prune


def mark_of(role: str, content: str) -> str:
    return hashlib.md5(f"{role}:{content}".encode(), usedforsecurity=False).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class MarkStore:
    def __init__(self, engine: AsyncEngine, *, prune_every: float = PRUNE_EVERY_SECONDS) -> None:
        self._engine = engine
        self._prune_every = prune_every
        self._next_prune = 0.0  # monotonic; the first ``record`` prunes

    async def present(self, tenant_id: str, conversation_id: str, marks: Iterable[str]) -> set[str]:
        """The marks among ``marks`` recorded and not yet expired."""
        wanted = sorted(set(marks))
        if not wanted:
            return set()
        found: set[str] = set()
        async with self._engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                query = select(processed_mark.c.mark).where(
                    processed_mark.c.tenant_id == tenant_id,
                    processed_mark.c.conversation_id == conversation_id,
                    processed_mark.c.mark.in_(wanted[start : start + 500]),
                    processed_mark.c.expires_at > _now(),
                )
                found |= set((await conn.execute(query)).scalars())
        return found

    async def record(self, tenant_id: str, conversation_id: str, marks: Iterable[str]) -> None:
        """Record marks (or extend them) for seven days from now; prune expired ones when due."""
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
        if rows:
            stmt: Executable
            if self._engine.dialect.name == "sqlite":
                ins = sqlite.insert(processed_mark)
                stmt = ins.on_conflict_do_update(
                    index_elements=["tenant_id", "conversation_id", "mark"],
                    set_={"expires_at": ins.excluded.expires_at},
                )
            else:
                mins = mysql.insert(processed_mark)
                stmt = mins.on_duplicate_key_update(expires_at=mins.inserted.expires_at)
            async with self._engine.begin() as conn:
                await conn.execute(stmt, rows)
        await self._prune_when_due()

    async def _prune_when_due(self) -> None:
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._prune_every
        try:
            if await self.prune() >= PRUNE_CHUNK * PRUNE_ROUND:
                self._next_prune = now  # more expired than one round: go on next time
        except Exception as exc:
            # The marks are recorded; an expired mark left for the next round harms nothing.
            log.warning("pruning expired processed marks failed: %r", exc)

    async def prune(self, *, chunk: int = PRUNE_CHUNK, rounds: int = PRUNE_ROUND) -> int:
        """Delete expired marks, at most ``chunk`` rows per statement and ``rounds``
        statements; answers how many."""
        total = 0
        for _ in range(rounds):
            expired = processed_mark.c.expires_at <= _now()
            stmt: Executable
            if self._engine.dialect.name == "sqlite":
                rowid = literal_column("rowid", Integer())
                stmt = delete(processed_mark).where(
                    rowid.in_(select(rowid).where(expired).limit(chunk))
                )
            else:
                stmt = delete(processed_mark).where(expired).with_dialect_options(mysql_limit=chunk)
            async with self._engine.begin() as conn:
                done = int((await conn.execute(stmt)).rowcount or 0)
            total += done
            if done < chunk:
                break
        return total
