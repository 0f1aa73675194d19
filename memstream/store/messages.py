"""The message record: batched, idempotent writes and bounded reads of recent history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Insert, delete, func, select, tuple_
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_message


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

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @staticmethod
    def _idempotent_insert(dialect: str) -> Insert:
        # A duplicate (tenant_id, event_id) is a no-op, never an error: redelivery is normal.
        if dialect in ("mysql", "mariadb"):
            stmt = mysql.insert(conversation_message)
            return stmt.on_duplicate_key_update(event_id=stmt.inserted.event_id)
        if dialect == "sqlite":
            return sqlite.insert(conversation_message).on_conflict_do_nothing(
                index_elements=["tenant_id", "event_id"]
            )
        raise ValueError(f"unsupported database dialect {dialect!r}")

    async def insert_many(self, messages: Sequence[StoredMessage]) -> None:
        """Store a batch in one transaction; already stored event ids are left as they are."""
        if not messages:
            return
        # A shallow row dict per message: dataclasses.asdict deep-copies and costs double.
        rows = [{name: getattr(m, name) for name in _FIELDS} for m in messages]
        async with self._engine.begin() as conn:
            await conn.execute(self._insert, rows)

    async def delete_events(self, tenant_id: str, event_ids: Sequence[str]) -> int:
        """Delete the messages of ``event_ids`` (a write a forget overtook); answers how many."""
        if not event_ids:
            return 0
        async with self._engine.begin() as conn:
            done = await conn.execute(
                delete(conversation_message).where(
                    conversation_message.c.tenant_id == tenant_id,
                    conversation_message.c.event_id.in_(list(event_ids)),
                )
            )
        return int(done.rowcount or 0)

    async def written_through(
        self, tenant_id: str, conversation_id: str, user_id: str, last_id: int
    ) -> set[str]:
        """Event ids of the user's messages in the conversation stored by row ``last_id``."""
        query = select(conversation_message.c.event_id).where(
            conversation_message.c.tenant_id == tenant_id,
            conversation_message.c.conversation_id == conversation_id,
            conversation_message.c.user_id == user_id,
            conversation_message.c.id <= last_id,
        )
        async with self._engine.connect() as conn:
            return set((await conn.execute(query)).scalars())

    async def recent(self, tenant_id: str, conversation_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a conversation, oldest first."""
        query = (
            select(*_COLUMNS)
            .where(
                conversation_message.c.tenant_id == tenant_id,
                conversation_message.c.conversation_id == conversation_id,
            )
            .order_by(conversation_message.c.created_at.desc(), conversation_message.c.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [StoredMessage(**row._mapping) for row in reversed(rows)]

    async def newest_turns(
        self, tenant_id: str, conversation_id: str, limit: int
    ) -> list[tuple[str, str, str, int]]:
        """The newest ``limit`` chat turns of a conversation (tool rows left out), oldest
        first, as (role, message type, content, token count)."""
        query = (
            select(
                conversation_message.c.role,
                conversation_message.c.message_type,
                conversation_message.c.content,
                conversation_message.c.token_count,
            )
            .where(
                conversation_message.c.tenant_id == tenant_id,
                conversation_message.c.conversation_id == conversation_id,
                conversation_message.c.message_type == "chat",
                conversation_message.c.role != "tool",
            )
            .order_by(conversation_message.c.created_at.desc(), conversation_message.c.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(row.role, row.message_type, row.content, row.token_count) for row in rows[::-1]]

    async def recent_many(
        self, conversations: Sequence[tuple[str, str]], limit: int
    ) -> dict[tuple[str, str], list[StoredMessage]]:
        """The newest ``limit`` messages of each (tenant, conversation), oldest first, in one
        query per chunk instead of one per conversation."""
        out: dict[tuple[str, str], list[StoredMessage]] = {conv: [] for conv in conversations}
        for start in range(0, len(conversations), 200):
            chunk = conversations[start : start + 200]
            rank = (
                func.row_number()
                .over(
                    partition_by=(
                        conversation_message.c.tenant_id,
                        conversation_message.c.conversation_id,
                    ),
                    order_by=(
                        conversation_message.c.created_at.desc(),
                        conversation_message.c.id.desc(),
                    ),
                )
                .label("rank")
            )
            ranked = (
                select(*_COLUMNS, conversation_message.c.id, rank)
                .where(
                    tuple_(
                        conversation_message.c.tenant_id, conversation_message.c.conversation_id
                    ).in_(chunk)
                )
                .subquery()
            )
            query = (
                select(*[ranked.c[name] for name in _FIELDS])
                .where(ranked.c.rank <= limit)
                .order_by(ranked.c.created_at, ranked.c.id)
            )
            async with self._engine.connect() as conn:
                for row in (await conn.execute(query)).all():
                    m = StoredMessage(**row._mapping)
                    out[(m.tenant_id, m.conversation_id)].append(m)
        return out

    async def active_tenants(self, limit: int) -> list[str]:
        """The tenants with stored messages, the most recently active first, ``limit`` at most."""
        latest = func.max(conversation_message.c.created_at)
        query = (
            select(conversation_message.c.tenant_id)
            .group_by(conversation_message.c.tenant_id)
            .order_by(latest.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return list((await conn.execute(query)).scalars().all())

    async def count(self, tenant_id: str, conversation_id: str | None = None) -> int:
        """How many messages a tenant (or one of its conversations) has stored."""
        query = (
            select(func.count())
            .select_from(conversation_message)
            .where(conversation_message.c.tenant_id == tenant_id)
        )
        if conversation_id is not None:
            query = query.where(conversation_message.c.conversation_id == conversation_id)
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar_one())


_FIELDS = tuple(StoredMessage.__dataclass_fields__)
_COLUMNS = [getattr(conversation_message.c, name) for name in _FIELDS]
