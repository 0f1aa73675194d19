"""Conversation summaries (``conversation_summary``): read by the load path."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_summary as t


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    token_count: int


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
