"""A memory's history (``GET /v1/memories/{id}/history``): the chain of memories it superseded
and that superseded it, oldest first, each with its text, times, why it was added and why it
ended, and the messages it came from while the record still has them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.store.database import in_lists
from memstream.store.schema import (
    conversation_message,
    long_term_memory,
    memory_change,
    memory_link,
    provider_memory,
)

MAX_CHAIN = 100  # memories one history shows at most

State = Literal["live", "superseded", "deleted", "expired", "forgotten"]
_ENDED: dict[str, State] = {s: s for s in ("superseded", "deleted", "expired", "forgotten")}


class SourceMessage(BaseModel):
    event_id: str
    role: str
    content: str
    created_at: datetime


class Step(BaseModel):
    """One change of the memory: why (``cause``), from which conversation, when."""

    change: str
    cause: str
    conversation_id: str | None = None
    at: datetime
    trace_id: str | None = Field(None, description="the trace of the session end behind it")


class HistoryItem(BaseModel):
    id: str
    provider: str
    cube_id: str
    memory_type: str
    kind: str
    content: str
    created_at: datetime
    occurred_at: datetime | None = None
    deleted_at: datetime | None = None
    state: State
    added: Step | None = Field(None, description="how it came: a session or the API")
    ended: Step | None = Field(None, description="how it stopped being live, if it did")
    supersedes: list[str]
    superseded_by: list[str]
    source_event_ids: list[str]
    source_messages: list[SourceMessage]
    trace_id: str | None = Field(None, description="the trace of the session end it came from")


class HistoryResponse(BaseModel):
    memory_id: str
    items: list[HistoryItem]


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


async def _chain(
    conn: AsyncConnection, tenant_id: str, memory_id: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """The memories linked to ``memory_id`` through supersessions, either way, and the links."""
    link = memory_link.c
    seen = {memory_id}
    frontier = [memory_id]
    links: set[tuple[str, str]] = set()
    while frontier and len(seen) < MAX_CHAIN:
        query = select(link.memory_id, link.supersedes_id).where(
            link.tenant_id == tenant_id,
            or_(link.memory_id.in_(frontier), link.supersedes_id.in_(frontier)),
        )
        found = [(r.memory_id, r.supersedes_id) for r in (await conn.execute(query)).all()]
        links.update(found)
        frontier = [i for pair in found for i in pair if i not in seen][: MAX_CHAIN - len(seen)]
        seen.update(frontier)
    return sorted(seen), sorted(links)


async def history(engine: AsyncEngine, tenant_id: str, memory_id: str) -> HistoryResponse | None:
    """The history of one memory of ``tenant_id``; None when the record knows no such memory."""
    async with engine.connect() as conn:
        ids, links = await _chain(conn, tenant_id, memory_id)
        memories = await _memories(conn, tenant_id, ids)
        if memory_id not in memories:
            return None
        steps = await _steps(conn, tenant_id, ids)
        wanted = sorted({e for m in memories.values() for e in m["source_event_ids"]})
        messages = await _messages(conn, tenant_id, wanted)
    items = []
    for mid, memory in memories.items():
        added, ended = steps.get(mid, (None, None))
        sources = memory["source_event_ids"] or (added[1] if added else [])
        state: State = "live"
        if memory["deleted_at"] is not None:
            state = _ENDED.get(ended[0].change, "deleted") if ended else "deleted"
        items.append(
            HistoryItem(
                **{k: v for k, v in memory.items() if k not in ("source_event_ids", "trace_id")},
                state=state,
                added=added[0] if added else None,
                ended=ended[0] if ended else None,
                supersedes=[old for new, old in links if new == mid],
                superseded_by=[new for new, old in links if old == mid],
                source_event_ids=list(sources),
                source_messages=[messages[e] for e in sources if e in messages],
                trace_id=memory["trace_id"] or (added[0].trace_id if added else None),
            )
        )
    items.sort(key=lambda item: (item.created_at, item.id))
    return HistoryResponse(memory_id=memory_id, items=items)


async def _memories(
    conn: AsyncConnection, tenant_id: str, ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """What the record keeps of each memory: the built-in store's row, else the ledger's."""
    found: dict[str, dict[str, Any]] = {}
    m, p = long_term_memory.c, provider_memory.c
    for chunk in in_lists(ids):
        query = select(long_term_memory).where(m.tenant_id == tenant_id, m.id.in_(chunk))
        for row in (await conn.execute(query)).all():
            found[row.id] = {
                "id": row.id,
                "provider": "MYSQL",
                "cube_id": row.cube_id,
                "memory_type": row.memory_type,
                "kind": row.kind,
                "content": row.content,
                "created_at": _utc(row.created_at),
                "occurred_at": _utc(row.occurred_at),
                "deleted_at": _utc(row.deleted_at),
                "source_event_ids": [str(e) for e in row.source_event_ids or ()],
                "trace_id": row.trace_id,
            }
        query = select(provider_memory).where(p.tenant_id == tenant_id, p.memory_id.in_(chunk))
        for row in (await conn.execute(query)).all():
            found.setdefault(
                row.memory_id,
                {
                    "id": row.memory_id,
                    "provider": row.provider,
                    "cube_id": row.cube_id,
                    "memory_type": row.memory_type,
                    "kind": "fact",
                    "content": row.content,
                    "created_at": _utc(row.created_at),
                    "occurred_at": None,
                    "deleted_at": _utc(row.deleted_at),
                    "source_event_ids": [],
                    "trace_id": None,
                },
            )
    return found


Noted = tuple[Step, list[str]]  # a step and the source event ids its change named


async def _steps(
    conn: AsyncConnection, tenant_id: str, ids: Sequence[str]
) -> dict[str, tuple[Noted | None, Noted | None]]:
    """Per memory, its recorded ``added`` change and the change that ended it."""
    c = memory_change.c
    out: dict[str, tuple[Noted | None, Noted | None]] = {}
    for chunk in in_lists(ids):
        query = (
            select(c.memory_id, c.change, c.cause, c.conversation_id, c.changed_at, c.payload)
            .where(c.tenant_id == tenant_id, c.memory_id.in_(chunk))
            .order_by(c.seq)
        )
        for row in (await conn.execute(query)).all():
            at = _utc(row.changed_at)
            assert at is not None
            payload = orjson.loads(row.payload)
            step = Step(
                change=row.change,
                cause=row.cause,
                conversation_id=row.conversation_id,
                at=at,
                trace_id=payload.get("trace_id"),
            )
            sources = [str(e) for e in payload.get("source_event_ids") or ()]
            added, ended = out.get(row.memory_id, (None, None))
            if row.change == "added":
                added = (step, sources)
            else:
                ended = (step, sources)
            out[row.memory_id] = (added, ended)
    return out


async def _messages(
    conn: AsyncConnection, tenant_id: str, event_ids: Sequence[str]
) -> dict[str, SourceMessage]:
    """The stored messages among ``event_ids`` (those the record still has)."""
    c = conversation_message.c
    found: dict[str, SourceMessage] = {}
    for chunk in in_lists(event_ids):
        query = select(c.event_id, c.role, c.content, c.created_at).where(
            c.tenant_id == tenant_id, c.event_id.in_(chunk)
        )
        for row in (await conn.execute(query)).all():
            created = _utc(row.created_at)
            assert created is not None
            found[row.event_id] = SourceMessage(
                event_id=row.event_id, role=row.role, content=row.content, created_at=created
            )
    return found
