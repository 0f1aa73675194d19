"""The built-in store's statements on ``long_term_memory`` and ``memory_embedding``, and the
conversions between its rows and memory items."""

from __future__ import annotations

import uuid
from collections.abc import Container, Sequence
from datetime import UTC, datetime
from typing import Any, get_args

import orjson
from sqlalchemy import Insert, Row, bindparam, case, delete, func, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.identity import content_hash
from memstream.memory import (
    MEMORY_TYPES,
    USER_PROFILE,
    MemoryItem,
    MemoryKind,
    MemoryType,
    NewMemory,
)
from memstream.store.database import force_index, in_lists
from memstream.store.prepared import Prepared
from memstream.store.schema import long_term_memory, memory_embedding
from memstream.text.normalise import fold_spaces_and_case

MEMORY_KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)
# (memories, deleted memories) of a user, what the lexical index follows; then the same plus
# the user's vectors of the embedding model, what the vector matrix follows. Each only grows.
Counts = tuple[int, int]
Fingerprint = tuple[int, int, int]
# The unique key of a memory's content: (tenant_id, user_id, cube_id, content_hash).
ContentKey = tuple[str, str, str, str]

COLUMNS = (
    long_term_memory.c.id,
    long_term_memory.c.tenant_id,
    long_term_memory.c.user_id,
    long_term_memory.c.agent_id,
    long_term_memory.c.cube_id,
    long_term_memory.c.memory_type,
    long_term_memory.c.content,
    long_term_memory.c.importance,
    long_term_memory.c.source_event_ids,
    long_term_memory.c.created_at,
    long_term_memory.c.kind,
    long_term_memory.c.occurred_at,
)


# A row's columns but the two a search already knows (tenant and user), as one JSON array:
# every result column costs the driver a descriptor to parse on each statement and each
# value a conversion, where one array is one C call (``unpacked``).
PACKED = func.json_array(
    *(column for column in COLUMNS if column.name not in ("tenant_id", "user_id"))
).label("packed")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _utc(value: datetime | None) -> datetime | None:
    """A stored naive time as an aware UTC one."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _naive_utc(value: datetime | None) -> datetime | None:
    """A time as the columns keep it: naive UTC (a naive input is taken as UTC)."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def item_of(row: Row[Any]) -> MemoryItem:
    created: datetime = row.created_at
    kind: MemoryKind = row.kind if row.kind in MEMORY_KINDS else "fact"
    return MemoryItem(
        id=row.id,
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        cube_id=row.cube_id,
        memory_type=row.memory_type,
        content=row.content,
        importance=int(row.importance),
        source_event_ids=tuple(str(e) for e in (row.source_event_ids or ())),
        created_at=created.replace(tzinfo=UTC) if created.tzinfo is None else created,
        kind=kind,
        occurred_at=_utc(row.occurred_at),
    )


def unpacked(tenant_id: str, user_id: str, packed: str) -> MemoryItem:
    """The memory of a ``PACKED`` row of this tenant's user."""
    mid, agent_id, cube_id, memory_type, content, importance, sources, created, kind, occurred = (
        orjson.loads(packed)
    )
    if isinstance(sources, str):  # SQLite keeps the JSON column as text, and says so
        sources = orjson.loads(sources)
    return MemoryItem(
        id=mid,
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        cube_id=cube_id,
        memory_type=memory_type,
        content=content,
        importance=int(importance),
        source_event_ids=tuple(str(e) for e in sources or ()),
        created_at=_stored_time(created),
        kind=kind if kind in MEMORY_KINDS else "fact",
        occurred_at=None if occurred is None else _stored_time(occurred),
    )


def _stored_time(text: str) -> datetime:
    """A naive UTC time as the database writes it in JSON (``2026-01-02 03:04:05.000006``)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def new_row(memory: NewMemory, now: datetime) -> dict[str, Any]:
    if memory.memory_type not in MEMORY_TYPES:
        raise ValueError(f"unknown memory_type {memory.memory_type!r}")
    if memory.cube_id != USER_PROFILE and not memory.cube_id.startswith("agent_"):
        raise ValueError(f"cube_id must be {USER_PROFILE!r} or 'agent_<agent_id>'")
    if not fold_spaces_and_case(memory.content):
        raise ValueError("memory content is empty")
    if memory.kind not in MEMORY_KINDS:
        raise ValueError(f"unknown memory kind {memory.kind!r}")
    memory_type: MemoryType = memory.memory_type
    return {
        "id": uuid.uuid4().hex,
        "tenant_id": memory.tenant_id,
        "user_id": memory.user_id,
        "agent_id": memory.agent_id,
        "cube_id": memory.cube_id,
        "memory_type": memory_type,
        "content": memory.content,
        "importance": min(10, max(1, int(memory.importance))),
        "source_event_ids": list(memory.source_event_ids),
        "content_hash": content_hash(memory.content),
        "created_at": _naive_utc(memory.created_at) or now,
        "deleted_at": None,
        "kind": memory.kind,
        "occurred_at": _naive_utc(memory.occurred_at),
    }


def content_key(row: dict[str, Any]) -> ContentKey:
    return (row["tenant_id"], row["user_id"], row["cube_id"], row["content_hash"])


# --- writes ------------------------------------------------------------------------------


def insert_ignore(dialect: str) -> Insert:
    # A row whose (tenant_id, user_id, cube_id, content_hash) is already stored is left as
    # it is: the statement is a no-op for it, never an error.
    if dialect == "sqlite":
        return sqlite.insert(long_term_memory).on_conflict_do_nothing()
    stmt = mysql.insert(long_term_memory)
    return stmt.on_duplicate_key_update(content_hash=stmt.inserted.content_hash)


async def read_back(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]]
) -> tuple[dict[ContentKey, MemoryItem], list[tuple[str, str]]]:
    """The live stored row behind each new row's key, and ids of deleted key holders."""
    wanted = {content_key(r) for r in rows}
    by_cube: dict[tuple[str, str, str], list[str]] = {}
    for tenant, user, cube, digest in sorted(wanted):
        by_cube.setdefault((tenant, user, cube), []).append(digest)
    found: dict[ContentKey, MemoryItem] = {}
    dead: list[tuple[str, str]] = []
    for (tenant, user, cube), digests in by_cube.items():
        for chunk in in_lists(digests):
            # Point lookups on the unique key.
            query = select(
                *COLUMNS, long_term_memory.c.content_hash, long_term_memory.c.deleted_at
            ).where(
                long_term_memory.c.tenant_id == tenant,
                long_term_memory.c.user_id == user,
                long_term_memory.c.cube_id == cube,
                long_term_memory.c.content_hash.in_(chunk),
            )
            for row in (await conn.execute(query)).all():
                key = (row.tenant_id, row.user_id, row.cube_id, row.content_hash)
                if row.deleted_at is not None:
                    dead.append((row.tenant_id, row.id))
                else:
                    found[key] = item_of(row)
    return found, dead


async def free_key(conn: AsyncConnection, tenant_id: str, memory_id: str) -> None:
    """Tombstone a deleted row that still holds its content key."""
    await conn.execute(
        update(long_term_memory)
        .where(long_term_memory.c.tenant_id == tenant_id, long_term_memory.c.id == memory_id)
        .values(content_hash=long_term_memory.c.id)
    )


def by_ids(tenant_id: str, ids: Sequence[str]) -> tuple[Any, ...]:
    """The live memories of ``tenant_id`` among ``ids``."""
    return (
        long_term_memory.c.tenant_id == tenant_id,
        long_term_memory.c.id.in_(ids),
        long_term_memory.c.deleted_at.is_(None),
    )


def of_user(tenant_id: str, user_id: str) -> tuple[Any, ...]:
    """The live memories of one user."""
    return (
        long_term_memory.c.tenant_id == tenant_id,
        long_term_memory.c.user_id == user_id,
        long_term_memory.c.deleted_at.is_(None),
    )


async def expire(conn: AsyncConnection, scope: tuple[Any, ...]) -> list[MemoryItem]:
    """Soft-delete the live memories in ``scope``; answers them as they were."""
    # Lock the rows first so that two concurrent deletes never both report the same id
    # (SQLite ignores FOR UPDATE: its writers are serialised anyway).
    query = select(*COLUMNS).where(*scope).with_for_update()
    items = [item_of(row) for row in (await conn.execute(query)).all()]
    if items:
        # The tombstone frees the content key (docs/design/builtin-store.md).
        await conn.execute(
            update(long_term_memory)
            .where(*scope)
            .values(deleted_at=now(), content_hash=long_term_memory.c.id)
        )
    return items


async def erase(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> None:
    """Erase the text of deleted memories and the vectors made from it; the tombstone rows
    stay (the ids are known, and never live again)."""
    if ids:
        await conn.execute(
            update(long_term_memory)
            .where(long_term_memory.c.tenant_id == tenant_id, long_term_memory.c.id.in_(ids))
            .values(content="")
        )
        await conn.execute(
            delete(memory_embedding).where(
                memory_embedding.c.tenant_id == tenant_id, memory_embedding.c.memory_id.in_(ids)
            )
        )


# --- reads -------------------------------------------------------------------------------


async def list_live(
    conn: AsyncConnection, tenant_id: str, user_id: str, cubes: Sequence[str]
) -> list[MemoryItem]:
    query = (
        select(*COLUMNS)
        .where(
            long_term_memory.c.tenant_id == tenant_id,
            long_term_memory.c.user_id == user_id,
            long_term_memory.c.cube_id.in_(cubes),
            long_term_memory.c.deleted_at.is_(None),
        )
        .order_by(long_term_memory.c.created_at.desc(), long_term_memory.c.id)
    )
    return [item_of(row) for row in (await conn.execute(query)).all()]


# Built once, ``ids`` bound as a list: a search's last statement costs no construction.
_LIVE_ITEMS = force_index(
    select(*COLUMNS).where(
        long_term_memory.c.tenant_id == bindparam("tenant_id"),
        long_term_memory.c.id.in_(bindparam("ids", expanding=True)),
        long_term_memory.c.deleted_at.is_(None),
    ),
    long_term_memory,
    "PRIMARY",
)


async def live_items(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> list[MemoryItem]:
    """The live memories of ``tenant_id`` among ``ids`` (point lookups on the primary key)."""
    found: list[MemoryItem] = []
    for chunk in in_lists(ids):
        params = {"tenant_id": tenant_id, "ids": list(chunk)}
        found += [item_of(row) for row in (await conn.execute(_LIVE_ITEMS, params)).all()]
    return found


_SEARCHABLE = Prepared(
    select(PACKED, long_term_memory.c.term_count)
    .where(
        long_term_memory.c.tenant_id == bindparam("tenant_id"),
        long_term_memory.c.user_id == bindparam("user_id"),
        long_term_memory.c.deleted_at.is_(None),
    )
    .limit(bindparam("limit"))
)


async def searchable(
    conn: AsyncConnection, tenant_id: str, user_id: str, *, limit: int
) -> list[tuple[str, int | None]] | None:
    """Every live memory of the user, packed as a search reads them (``unpacked``), each with
    its length in index terms (None: no postings yet); None when the user has more than
    ``limit``."""
    params = {"tenant_id": tenant_id, "user_id": user_id, "limit": limit + 1}
    rows = await _SEARCHABLE.rows(conn, params)
    if len(rows) > limit:
        return None
    return [(packed, None if length is None else int(length)) for packed, length in rows]


_LIVE_IDS = Prepared(
    force_index(
        select(long_term_memory.c.id).where(
            long_term_memory.c.tenant_id == bindparam("tenant_id"),
            long_term_memory.c.id.in_(bindparam("ids", expanding=True)),
            long_term_memory.c.deleted_at.is_(None),
        ),
        long_term_memory,
        "PRIMARY",
    )
)


async def live_ids(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` (at most a chunk) are live memories of ``tenant_id``."""
    params = {"tenant_id": tenant_id, "ids": list(ids)}
    return {memory_id for (memory_id,) in await _LIVE_IDS.rows(conn, params)}


async def fingerprint(
    conn: AsyncConnection, tenant_id: str, user_id: str, model: str | None
) -> Fingerprint:
    """The user's memory counts and, with an embedding ``model``, the count of its vectors."""
    columns: list[Any] = [func.count(), func.count(long_term_memory.c.deleted_at)]
    if model is not None:
        # The vector count in the same statement: one round trip, one consistent view.
        columns.append(
            select(func.count())
            .select_from(memory_embedding)
            .where(
                memory_embedding.c.tenant_id == tenant_id,
                memory_embedding.c.user_id == user_id,
                memory_embedding.c.model == model,
            )
            .scalar_subquery()
        )
    query = select(*columns).where(
        long_term_memory.c.tenant_id == tenant_id, long_term_memory.c.user_id == user_id
    )
    row = (await conn.execute(query)).one()
    return int(row[0]), int(row[1]), int(row[2]) if len(row) > 2 else 0


async def changes(
    conn: AsyncConnection,
    dialect: str,
    tenant_id: str,
    user_id: str,
    held: Container[str] | None,
) -> tuple[Counts, list[str], list[MemoryItem]]:
    """Fresh counts, the live ids and the live memories not in ``held``.

    The fingerprint and the live ids come from one statement (one consistent view), the
    ids joined into one string: aiomysql decodes a thousand one-column rows in about
    4 ms, one string in well under one. Rows read afterwards may be newer than the
    fingerprint, which costs one more refresh later, never a stale hit."""
    if dialect != "sqlite" and not conn.info.get("memstream_group_concat"):
        # MySQL 8 caps GROUP_CONCAT at 1,024 bytes by default (MariaDB at 1 MB); the
        # setting lives as long as the pooled connection.
        await conn.exec_driver_sql("SET SESSION group_concat_max_len = 16777216")
        conn.info["memstream_group_concat"] = True
    live_id = case((long_term_memory.c.deleted_at.is_(None), long_term_memory.c.id))
    query = select(
        func.count(), func.count(long_term_memory.c.deleted_at), func.group_concat(live_id)
    ).where(long_term_memory.c.tenant_id == tenant_id, long_term_memory.c.user_id == user_id)
    total, deleted, joined = (await conn.execute(query)).one()
    counts = (int(total), int(deleted))
    live_ids = joined.split(",") if joined else []
    if len(set(live_ids)) != counts[0] - counts[1]:
        # An id with a comma in it, or a truncated list: read them one row each.
        live_query = select(long_term_memory.c.id).where(*of_user(tenant_id, user_id))
        live_ids = [row.id for row in (await conn.execute(live_query)).all()]
    missing = [i for i in live_ids if held is None or i not in held]
    return counts, live_ids, await live_items(conn, tenant_id, missing)
