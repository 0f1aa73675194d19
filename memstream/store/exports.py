"""The reads behind an export (``memstream.transfer.export``): the built-in store's memories by
keyset pages, the ledger's users, cubes and kept texts of the external providers, and what a
page's memories replaced, were replaced by and are held under."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Row, literal, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.memory import MemoryItem
from memstream.store.database import in_lists
from memstream.store.ledger import ledger_item
from memstream.store.memory_history import MAX_CHAIN
from memstream.store.memory_rows import COLUMNS, item_of
from memstream.store.schema import long_term_memory, memory_key, memory_link, provider_memory

Position = tuple[str, datetime, str]  # (user, created_at, id) of a page's last memory


@dataclass(slots=True)
class Links:
    supersedes: dict[str, list[str]]
    superseded_by: dict[str, list[str]]


async def live_page(
    conn: AsyncConnection,
    tenant_id: str,
    limit: int,
    *,
    user_id: str | None = None,
    cubes: Sequence[str] | None = None,
    after: Position | None = None,
) -> list[Row[Any]]:
    """The next ``limit`` live memories of the built-in store after ``after``, by user, then
    oldest first (of one user, of ``cubes``, when given)."""
    memories = long_term_memory.c
    query = (
        select(*COLUMNS)
        .where(memories.tenant_id == tenant_id, memories.deleted_at.is_(None))
        .order_by(memories.user_id, memories.created_at, memories.id)
        .limit(limit)
    )
    if user_id is not None:
        query = query.where(memories.user_id == user_id)
    if cubes is not None:
        query = query.where(memories.cube_id.in_(cubes))
    if after is not None:
        position = tuple_(memories.user_id, memories.created_at, memories.id)
        query = query.where(position > tuple_(*map(literal, after)))
    return list((await conn.execute(query)).all())


async def builtin_items(
    conn: AsyncConnection, tenant_id: str, ids: Sequence[str]
) -> list[tuple[MemoryItem, datetime | None]]:
    """The built-in store's memories ``ids``, live or not, each with when it was deleted."""
    memories = long_term_memory.c
    out: list[tuple[MemoryItem, datetime | None]] = []
    for chunk in in_lists(list(ids)):
        found = await conn.execute(
            select(*COLUMNS, memories.deleted_at).where(
                memories.tenant_id == tenant_id, memories.id.in_(chunk)
            )
        )
        out += [(item_of(row), row.deleted_at) for row in found.all()]
    return out


async def links(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> Links:
    """What each of ``ids`` replaced and was replaced by."""
    link = memory_link.c
    out = Links({}, {})
    if not ids:
        return out
    query = select(link.memory_id, link.supersedes_id).where(
        link.tenant_id == tenant_id,
        or_(link.memory_id.in_(ids), link.supersedes_id.in_(ids)),
    )
    for row in (await conn.execute(query)).all():
        out.supersedes.setdefault(row.memory_id, []).append(row.supersedes_id)
        out.superseded_by.setdefault(row.supersedes_id, []).append(row.memory_id)
    return out


async def replaced(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> list[str]:
    """Every memory ``ids`` replaced, directly or through others, oldest last (bounded)."""
    link = memory_link.c
    seen: set[str] = set(ids)
    frontier, found = list(ids), list[str]()
    while frontier and len(found) < MAX_CHAIN:
        query = select(link.supersedes_id).where(
            link.tenant_id == tenant_id, link.memory_id.in_(frontier)
        )
        frontier = [i for i in (await conn.execute(query)).scalars() if i not in seen]
        seen.update(frontier)
        found += frontier
    return found[:MAX_CHAIN]


async def keyed(
    conn: AsyncConnection, tenant_id: str, ids: Sequence[str]
) -> dict[str, tuple[list[str], str, dict[str, Any]]]:
    """The namespace, key and value of the memories among ``ids`` held under a key."""
    key = memory_key.c
    if not ids:
        return {}
    query = select(key.memory_id, key.namespace, key.item_key, key.value).where(
        key.tenant_id == tenant_id, key.memory_id.in_(ids)
    )
    return {
        row.memory_id: (list(row.namespace), row.item_key, orjson.loads(row.value))
        for row in (await conn.execute(query)).all()
    }


async def ledger_cubes(
    engine: AsyncEngine, tenant_id: str, provider: str, user_id: str | None
) -> list[Row[Any]]:
    """(user, cube) of every live memory the ledger has of ``provider`` (of one user)."""
    ledger = provider_memory.c
    query = (
        select(ledger.user_id, ledger.cube_id)
        .distinct()
        .where(
            ledger.tenant_id == tenant_id,
            ledger.provider == provider,
            ledger.deleted_at.is_(None),
        )
    )
    if user_id is not None:
        query = query.where(ledger.user_id == user_id)
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())


async def ledger_items(
    conn: AsyncConnection, tenant_id: str, provider: str, ids: Sequence[str]
) -> list[tuple[MemoryItem, datetime | None]]:
    """What the ledger kept of memories an external provider no longer has (their text, if
    it was superseded rather than deleted by a user), oldest first."""
    ledger = provider_memory.c
    out: list[tuple[MemoryItem, datetime | None]] = []
    for chunk in in_lists(list(ids)):
        query = select(provider_memory).where(
            ledger.tenant_id == tenant_id, ledger.provider == provider, ledger.memory_id.in_(chunk)
        )
        for row in (await conn.execute(query)).all():
            if not row.content:
                continue
            item = ledger_item(row)
            out.append((item, row.deleted_at))
    out.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    return out
