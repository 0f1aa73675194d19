"""Each user's memory stamp (table ``memory_stamp``): a counter raised in every transaction
that changes which of the user's built-in memories are live or searchable (a memory added,
deleted, forgotten or given its postings), as its last statement, so that it holds the row's
lock only until the commit. A process that keeps a hot user's memories (the warm layer of
``providers/builtin/warm.py``) reads the stamp, one primary-key lookup, to tell whether what it
holds is still what the table holds. A stamp row is never deleted: a forgotten user's stamp
goes on rising, so no later state of the user can carry a stamp an earlier one had."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Insert, bindparam, literal_column, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.store.prepared import Prepared
from memstream.store.schema import memory_stamp

NEVER = 0
"""The stamp of a user whose memories were never changed since stamps exist."""


# A literal, not a bound 1: the driver rewrites a many-row insert into one statement and
# takes every parameter for a row's.
_NEXT = memory_stamp.c.stamp + literal_column("1")


def _raise(dialect: str) -> Insert:
    if dialect == "sqlite":
        stmt = sqlite.insert(memory_stamp)
        return stmt.on_conflict_do_update(
            index_elements=[memory_stamp.c.tenant_id, memory_stamp.c.user_id],
            set_={"stamp": _NEXT},
        )
    return mysql.insert(memory_stamp).on_duplicate_key_update(stamp=_NEXT)


async def bump(conn: AsyncConnection, users: Iterable[tuple[str, str]]) -> None:
    """Raise the stamps of ``users`` (tenant, user) in the caller's transaction; call it last,
    so that the stamps' row locks are held only until the commit (in sorted order: two
    transactions take them in the same order)."""
    rows = [
        {"tenant_id": tenant, "user_id": user, "stamp": 1} for tenant, user in sorted(set(users))
    ]
    if rows:
        await conn.execute(_raise(conn.dialect.name), rows)


READ = Prepared(
    select(memory_stamp.c.stamp).where(
        memory_stamp.c.tenant_id == bindparam("tenant_id"),
        memory_stamp.c.user_id == bindparam("user_id"),
    )
)
"""The user's stamp, for ``prepared.batch`` beside another statement (``of`` reads it)."""


def of(rows: Sequence[Any]) -> int:
    """The stamp in ``READ``'s rows (``NEVER`` without a row)."""
    return int(rows[0][0]) if rows else NEVER


async def read(conn: AsyncConnection, tenant_id: str, user_id: str) -> int:
    """The user's stamp (``NEVER`` without a row)."""
    return of(await READ.rows(conn, {"tenant_id": tenant_id, "user_id": user_id}))
