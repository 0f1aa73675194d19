"""Conversation summaries (``conversation_summary``): what they cover and how they are stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Executable, and_, bindparam, delete, func, or_, select, tuple_
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_message, conversation_summary

ConversationKey = tuple[str, str]
CHUNK = 200  # conversations per query


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary's text and token count; ``sentences`` is what an extractive summary keeps
    for the next one (``memstream.shortterm.fold``), None for a model's text."""

    text: str
    token_count: int
    sentences: str | None = None


@dataclass(frozen=True, slots=True)
class Uncovered:
    """The messages a conversation's summary does not cover yet, oldest first."""

    previous: Summary | None
    covered: int
    messages: list[tuple[int, str, str]]  # (id, role, content)


@dataclass(frozen=True, slots=True)
class Covering:
    """A new summary of a conversation and how far it covers it."""

    tenant_id: str
    conversation_id: str
    summary: Summary
    covered: int
    last_message_id: int


# Built once (the load path reads a summary on every cache miss): no per-call construction.
_GET = select(conversation_summary.c.summary, conversation_summary.c.token_count).where(
    conversation_summary.c.tenant_id == bindparam("tenant_id"),
    conversation_summary.c.conversation_id == bindparam("conversation_id"),
)


class SummaryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get(self, tenant_id: str, conversation_id: str) -> Summary | None:
        params = {"tenant_id": tenant_id, "conversation_id": conversation_id}
        async with self._engine.connect() as conn:
            row = (await conn.execute(_GET, params)).first()
        return None if row is None else Summary(row.summary, row.token_count)

    async def uncovered_counts(
        self, conversations: Sequence[ConversationKey]
    ) -> dict[ConversationKey, int]:
        """How many chat messages of each conversation its summary does not cover yet."""
        out: dict[ConversationKey, int] = {}
        for start in range(0, len(conversations), CHUNK):
            chunk = list(conversations[start : start + CHUNK])
            joined = conversation_message.outerjoin(
                conversation_summary,
                and_(
                    conversation_summary.c.tenant_id == conversation_message.c.tenant_id,
                    conversation_summary.c.conversation_id
                    == conversation_message.c.conversation_id,
                ),
            )
            query = (
                select(
                    conversation_message.c.tenant_id,
                    conversation_message.c.conversation_id,
                    func.count(),
                )
                .select_from(joined)
                .where(
                    tuple_(
                        conversation_message.c.tenant_id, conversation_message.c.conversation_id
                    ).in_(chunk),
                    conversation_message.c.message_type == "chat",
                    conversation_message.c.id
                    > func.coalesce(conversation_summary.c.last_message_id, 0),
                )
                .group_by(conversation_message.c.tenant_id, conversation_message.c.conversation_id)
            )
            async with self._engine.connect() as conn:
                for tenant_id, conversation_id, count in (await conn.execute(query)).all():
                    out[(tenant_id, conversation_id)] = int(count)
        return out

    async def uncovered(self, tenant_id: str, conversation_id: str, limit: int = 1000) -> Uncovered:
        return (await self.uncovered_many([(tenant_id, conversation_id)], limit))[
            (tenant_id, conversation_id)
        ]

    async def uncovered_many(
        self, conversations: Sequence[ConversationKey], limit: int = 1000
    ) -> dict[ConversationKey, Uncovered]:
        """Each conversation's summary and the (at most ``limit``) oldest chat messages it
        does not cover, in two queries per chunk of conversations. The messages of each are
        one range of the (tenant, conversation, type, id) index: the cost is what is new."""
        out: dict[ConversationKey, Uncovered] = {}
        for start in range(0, len(conversations), CHUNK):
            chunk = list(dict.fromkeys(conversations[start : start + CHUNK]))
            async with self._engine.connect() as conn:
                previous = {
                    (r.tenant_id, r.conversation_id): r
                    for r in await conn.execute(
                        select(
                            conversation_summary.c.tenant_id,
                            conversation_summary.c.conversation_id,
                            conversation_summary.c.summary,
                            conversation_summary.c.token_count,
                            conversation_summary.c.sentences,
                            conversation_summary.c.covered_messages,
                            conversation_summary.c.last_message_id,
                        ).where(
                            tuple_(
                                conversation_summary.c.tenant_id,
                                conversation_summary.c.conversation_id,
                            ).in_(chunk)
                        )
                    )
                }
                after = {key: (row.last_message_id or 0) for key, row in previous.items()}
                ranges = [
                    and_(
                        conversation_message.c.tenant_id == tenant_id,
                        conversation_message.c.conversation_id == conversation_id,
                        conversation_message.c.message_type == "chat",
                        conversation_message.c.id > after.get((tenant_id, conversation_id), 0),
                    )
                    for tenant_id, conversation_id in chunk
                ]
                rank = (
                    func.row_number()
                    .over(
                        partition_by=(
                            conversation_message.c.tenant_id,
                            conversation_message.c.conversation_id,
                        ),
                        order_by=conversation_message.c.id,
                    )
                    .label("rank")
                )
                ranked = (
                    select(
                        conversation_message.c.tenant_id,
                        conversation_message.c.conversation_id,
                        conversation_message.c.id,
                        conversation_message.c.role,
                        conversation_message.c.content,
                        rank,
                    )
                    .where(or_(*ranges))
                    .subquery()
                )
                rows = (
                    await conn.execute(
                        select(ranked).where(ranked.c.rank <= limit).order_by(ranked.c.id)
                    )
                ).all()
            messages: dict[ConversationKey, list[tuple[int, str, str]]] = {k: [] for k in chunk}
            for r in rows:
                messages[(r.tenant_id, r.conversation_id)].append((r.id, r.role, r.content))
            for key in chunk:
                row: Any = previous.get(key)
                out[key] = Uncovered(
                    previous=None
                    if row is None
                    else Summary(row.summary, row.token_count, row.sentences),
                    covered=row.covered_messages if row is not None else 0,
                    messages=messages[key],
                )
        return out

    async def save(
        self,
        tenant_id: str,
        conversation_id: str,
        summary: Summary,
        *,
        covered: int,
        last_message_id: int,
    ) -> None:
        await self.save_many(
            [Covering(tenant_id, conversation_id, summary, covered, last_message_id)]
        )

    async def save_many(self, coverings: Sequence[Covering]) -> None:
        """Write (insert or replace) the summaries in one statement."""
        if not coverings:
            return
        now = datetime.now(UTC).replace(tzinfo=None)
        rows = [
            {
                "tenant_id": c.tenant_id,
                "conversation_id": c.conversation_id,
                "summary": c.summary.text,
                "token_count": c.summary.token_count,
                "sentences": c.summary.sentences,
                "covered_messages": c.covered,
                "last_message_id": c.last_message_id,
                "updated_at": now,
            }
            for c in coverings
        ]
        changed = ("summary", "token_count", "sentences", "covered_messages", "last_message_id")
        updated = (*changed, "updated_at")
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            lite = sqlite.insert(conversation_summary).values(rows)
            stmt = lite.on_conflict_do_update(
                index_elements=["tenant_id", "conversation_id"],
                set_={name: lite.excluded[name] for name in updated},
            )
        else:
            mine = mysql.insert(conversation_summary).values(rows)
            stmt = mine.on_duplicate_key_update({name: mine.inserted[name] for name in updated})
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def drop(self, conversations: Sequence[ConversationKey]) -> None:
        """Delete conversations' summaries (a fold a forget overtook): the next is folded anew
        from what the record holds then."""
        keys = sorted(set(conversations))
        for start in range(0, len(keys), CHUNK):
            async with self._engine.begin() as conn:
                await conn.execute(
                    delete(conversation_summary).where(
                        tuple_(
                            conversation_summary.c.tenant_id, conversation_summary.c.conversation_id
                        ).in_(keys[start : start + CHUNK])
                    )
                )
