"""Conversation summaries (``conversation_summary``): what they cover and how they are stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Executable, and_, func, select, tuple_
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_message as m
from memstream.store.schema import conversation_summary as t

ConversationKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    token_count: int


@dataclass(frozen=True, slots=True)
class Uncovered:
    """The messages a conversation's summary does not cover yet, oldest first."""

    previous: str | None
    covered: int
    messages: list[tuple[int, str, str]]  # (id, role, content)


class SummaryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get(self, tenant_id: str, conversation_id: str) -> Summary | None:
        query = select(t.c.summary, t.c.token_count).where(
            t.c.tenant_id == tenant_id, t.c.conversation_id == conversation_id
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else Summary(row.summary, row.token_count)

    async def uncovered_counts(
        self, conversations: Sequence[ConversationKey]
    ) -> dict[ConversationKey, int]:
        """How many chat messages of each conversation its summary does not cover yet."""
        out: dict[ConversationKey, int] = {}
        for start in range(0, len(conversations), 200):
            chunk = list(conversations[start : start + 200])
            joined = m.outerjoin(
                t, and_(t.c.tenant_id == m.c.tenant_id, t.c.conversation_id == m.c.conversation_id)
            )
            query = (
                select(m.c.tenant_id, m.c.conversation_id, func.count())
                .select_from(joined)
                .where(
                    tuple_(m.c.tenant_id, m.c.conversation_id).in_(chunk),
                    m.c.message_type == "chat",
                    m.c.id > func.coalesce(t.c.last_message_id, 0),
                )
                .group_by(m.c.tenant_id, m.c.conversation_id)
            )
            async with self._engine.connect() as conn:
                for tenant_id, conversation_id, count in (await conn.execute(query)).all():
                    out[(tenant_id, conversation_id)] = int(count)
        return out

    async def uncovered(self, tenant_id: str, conversation_id: str, limit: int = 1000) -> Uncovered:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(t.c.summary, t.c.covered_messages, t.c.last_message_id).where(
                        t.c.tenant_id == tenant_id, t.c.conversation_id == conversation_id
                    )
                )
            ).first()
            last_id = (row.last_message_id if row else None) or 0
            rows = (
                await conn.execute(
                    select(m.c.id, m.c.role, m.c.content)
                    .where(
                        m.c.tenant_id == tenant_id,
                        m.c.conversation_id == conversation_id,
                        m.c.message_type == "chat",
                        m.c.id > last_id,
                    )
                    .order_by(m.c.id)
                    .limit(limit)
                )
            ).all()
        return Uncovered(
            previous=row.summary if row else None,
            covered=row.covered_messages if row else 0,
            messages=[(r.id, r.role, r.content) for r in rows],
        )

    async def save(
        self,
        tenant_id: str,
        conversation_id: str,
        summary: Summary,
        *,
        covered: int,
        last_message_id: int,
    ) -> None:
        row = {
            "tenant_id": tenant_id,
            "conversation_id": conversation_id,
            "summary": summary.text,
            "token_count": summary.token_count,
            "covered_messages": covered,
            "last_message_id": last_message_id,
            "updated_at": datetime.now(UTC).replace(tzinfo=None),
        }
        changes = {k: v for k, v in row.items() if k not in ("tenant_id", "conversation_id")}
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            stmt = (
                sqlite.insert(t)
                .values(row)
                .on_conflict_do_update(
                    index_elements=["tenant_id", "conversation_id"], set_=changes
                )
            )
        else:
            stmt = mysql.insert(t).values(row).on_duplicate_key_update(**changes)
        async with self._engine.begin() as conn:
            await conn.execute(stmt)
