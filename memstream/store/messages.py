"""The message record: batched, idempotent writes and bounded reads of recent history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Insert, func, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_message as t


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message as the record keeps it (``created_at`` is naive UTC)."""

    tenant_id: str
    conversation_id: str
    event_id: str
    user_id: str
    agent_id: str | None
    role: str
    message_type: str
    content: str
    token_count: int
    created_at: datetime
    source_conversation_id: str
    metadata: dict[str, Any] | None = None


def utc_naive(moment: datetime) -> datetime:
    """Databases here store naive UTC; convert any aware time to that."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


class MessageStore:
    """Writes and reads ``conversation_message`` through one async engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._insert = self._idempotent_insert(engine.dialect.name)

    @staticmethod
    def _idempotent_insert(dialect: str) -> Insert:
        # A duplicate (tenant_id, event_id) is a no-op, never an error: redelivery is normal.
        if dialect in ("mysql", "mariadb"):
            stmt = mysql.insert(t)
            return stmt.on_duplicate_key_update(event_id=stmt.inserted.event_id)
        if dialect == "sqlite":
            return sqlite.insert(t).on_conflict_do_nothing(index_elements=["tenant_id", "event_id"])
        raise ValueError(f"unsupported database dialect {dialect!r}")

    async def insert_many(self, messages: Sequence[StoredMessage]) -> None:
        """Store a batch in one transaction; already stored event ids are left as they are."""
        if not messages:
            return
        rows = [asdict(m) for m in messages]
        async with self._engine.begin() as conn:
            await conn.execute(self._insert, rows)

    async def recent(self, tenant_id: str, conversation_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a conversation, oldest first."""
        query = (
            select(*_COLUMNS)
            .where(t.c.tenant_id == tenant_id, t.c.conversation_id == conversation_id)
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [StoredMessage(**row._mapping) for row in reversed(rows)]

    async def count(self, tenant_id: str, conversation_id: str | None = None) -> int:
        """How many messages a tenant (or one of its conversations) has stored."""
        query = select(func.count()).select_from(t).where(t.c.tenant_id == tenant_id)
        if conversation_id is not None:
            query = query.where(t.c.conversation_id == conversation_id)
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar_one())


_COLUMNS = [getattr(t.c, name) for name in StoredMessage.__dataclass_fields__]
