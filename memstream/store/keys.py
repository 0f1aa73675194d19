"""The ``memory_key`` rows: which memory holds the value a writer stored under a key (a
LangGraph store's items, ``/v1/items``; ``memstream.keyed`` is what they mean)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, delete, func, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.store.schema import long_term_memory, memory_key, provider_memory

_UPDATED = ("namespace", "path", "item_key", "cube_id", "provider", "memory_id", "value")


async def row_of(conn: AsyncConnection, tenant_id: str, user_id: str, slot: str) -> Any:
    """The key's row, None when nothing is stored under it."""
    query = select(memory_key).where(
        memory_key.c.tenant_id == tenant_id,
        memory_key.c.user_id == user_id,
        memory_key.c.slot == slot,
    )
    return (await conn.execute(query)).first()


async def put(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Write each key's row, replacing what the key held (its first write time kept)."""
    if conn.dialect.name == "sqlite":
        lite = sqlite.insert(memory_key)
        stmt: Any = lite.on_conflict_do_update(
            index_elements=["tenant_id", "user_id", "slot"],
            set_={c: lite.excluded[c] for c in (*_UPDATED, "updated_at")},
        )
    else:
        my = mysql.insert(memory_key)
        stmt = my.on_duplicate_key_update({c: my.inserted[c] for c in (*_UPDATED, "updated_at")})
    await conn.execute(stmt, list(rows))


async def drop(conn: AsyncConnection, tenant_id: str, user_id: str, slot: str) -> None:
    await conn.execute(
        delete(memory_key).where(
            memory_key.c.tenant_id == tenant_id,
            memory_key.c.user_id == user_id,
            memory_key.c.slot == slot,
        )
    )


async def holders(conn: AsyncConnection, tenant_id: str, memory_id: str) -> int:
    """How many keys hold the memory (two keys with the same text share one)."""
    held = await conn.scalar(
        select(func.count())
        .select_from(memory_key)
        .where(memory_key.c.tenant_id == tenant_id, memory_key.c.memory_id == memory_id)
    )
    return int(held or 0)


async def under(
    conn: AsyncConnection, tenant_id: str, user_id: str, cubes: Sequence[str], path: str | None
) -> list[Row[Any]]:
    """The user's keys in ``cubes`` (under the namespace ``path`` when given), newest first."""
    query = (
        select(memory_key)
        .where(
            memory_key.c.tenant_id == tenant_id,
            memory_key.c.user_id == user_id,
            memory_key.c.cube_id.in_(cubes),
        )
        .order_by(memory_key.c.updated_at.desc(), memory_key.c.slot)
    )
    if path is not None:
        query = query.where(memory_key.c.path.startswith(path, autoescape=True))
    return list((await conn.execute(query)).all())


async def holding(
    conn: AsyncConnection, tenant_id: str, user_id: str, memory_ids: Sequence[str]
) -> list[Row[Any]]:
    """The user's keys that hold one of ``memory_ids``."""
    if not memory_ids:
        return []
    query = select(memory_key).where(
        memory_key.c.tenant_id == tenant_id,
        memory_key.c.user_id == user_id,
        memory_key.c.memory_id.in_(memory_ids),
    )
    return list((await conn.execute(query)).all())


async def namespaces(conn: AsyncConnection, tenant_id: str, user_id: str | None) -> list[Any]:
    """(user id, namespace) of every key of the tenant (or of one user), each once."""
    query = (
        select(memory_key.c.user_id, memory_key.c.namespace)
        .distinct()
        .where(memory_key.c.tenant_id == tenant_id)
    )
    if user_id is not None:
        query = query.where(memory_key.c.user_id == user_id)
    return list((await conn.execute(query)).all())


async def live_ids(conn: AsyncConnection, tenant_id: str, memory_ids: Sequence[str]) -> set[str]:
    """Those of ``memory_ids`` the record still has live, in the built-in store or the ledger
    (a memory deleted by any path, or forgotten, takes its key's item with it)."""
    ids = sorted(set(memory_ids))
    if not ids:
        return set()
    live: set[str] = set()
    for table, key in (
        (long_term_memory, long_term_memory.c.id),
        (provider_memory, provider_memory.c.memory_id),
    ):
        query = select(key).where(
            table.c.tenant_id == tenant_id, key.in_(ids), table.c.deleted_at.is_(None)
        )
        live |= set((await conn.execute(query)).scalars())
    return live
