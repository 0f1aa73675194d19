"""How memory vectors are kept in full in ``memory_embedding``: float32 little-endian bytes,
one row per memory and model, written once (searches read the packed copy,
memstream.store.vector_blocks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Insert, Row, and_, or_, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.store.database import in_lists
from memstream.store.schema import long_term_memory, memory_embedding

_DTYPE = np.dtype("<f4")


@dataclass(frozen=True, slots=True)
class VectorRow:
    """One memory's vector, to be stored."""

    memory_id: str
    tenant_id: str
    user_id: str
    vector: npt.NDArray[np.float32]


def encode(vector: npt.NDArray[np.float32]) -> bytes:
    return np.ascontiguousarray(vector, dtype=_DTYPE).tobytes()


def decode(blob: bytes, dims: int) -> npt.NDArray[np.float32] | None:
    """A stored vector; None when the bytes are not ``dims`` float32s (written wrong)."""
    if len(blob) != dims * _DTYPE.itemsize:
        return None
    return np.frombuffer(blob, dtype=_DTYPE).astype(np.float32)


def insert_ignore(dialect: str) -> Insert:
    """An insert that leaves a vector already stored for the memory and model as it is."""
    if dialect == "sqlite":
        return sqlite.insert(memory_embedding).on_conflict_do_nothing()
    stmt = mysql.insert(memory_embedding)
    return stmt.on_duplicate_key_update(memory_id=stmt.inserted.memory_id)


async def store(conn: AsyncConnection, model: str, rows: Sequence[VectorRow]) -> None:
    """Insert the vectors of ``rows`` under ``model`` (a vector stored before stays)."""
    if not rows:
        return
    now = datetime.now(UTC).replace(tzinfo=None)
    values: list[dict[str, Any]] = [
        {
            "memory_id": row.memory_id,
            "model": model,
            "tenant_id": row.tenant_id,
            "user_id": row.user_id,
            "dims": int(row.vector.shape[0]),
            "vector": encode(row.vector),
            "created_at": now,
        }
        for row in rows
    ]
    await conn.execute(insert_ignore(conn.dialect.name), values)


async def load(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    model: str,
    dims: int,
    ids: Sequence[str] | None = None,
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """The user's vectors of ``model`` with ``dims`` dimensions (only those of ``ids`` when
    given): their memory ids and one row each."""
    base = select(memory_embedding.c.memory_id, memory_embedding.c.vector).where(
        memory_embedding.c.tenant_id == tenant_id,
        memory_embedding.c.user_id == user_id,
        memory_embedding.c.model == model,
        memory_embedding.c.dims == dims,
    )
    queries = (
        [base]
        if ids is None
        else [base.where(memory_embedding.c.memory_id.in_(c)) for c in in_lists(ids)]
    )
    found_ids: list[str] = []
    blobs: list[bytes] = []
    width = dims * _DTYPE.itemsize
    for query in queries:
        for row in (await conn.execute(query)).all():
            blob = bytes(row.vector)
            if len(blob) == width:  # a row written wrong is left out, never misread
                found_ids.append(row.memory_id)
                blobs.append(blob)
    matrix = np.frombuffer(b"".join(blobs), dtype=_DTYPE).reshape(len(blobs), dims)
    return found_ids, matrix.astype(np.float32, copy=False)


Lacking = Row[tuple[str, str, str, str, datetime]]  # id, tenant, user, content, created_at


async def lacking(
    conn: AsyncConnection,
    model: str,
    limit: int,
    *,
    tenant_id: str | None = None,
    since: datetime | None = None,
    after: tuple[datetime, str] | None = None,
    refused: Sequence[str] = (),
) -> Sequence[Lacking]:
    """Live memories without a vector of ``model``, oldest written first, ``limit`` at most:
    of one tenant, written since a time, after a (created_at, id) position, or not among
    ``refused``, when given."""
    memories = long_term_memory
    has_vector = and_(
        memory_embedding.c.memory_id == memories.c.id, memory_embedding.c.model == model
    )
    query = (
        select(
            memories.c.id,
            memories.c.tenant_id,
            memories.c.user_id,
            memories.c.content,
            memories.c.created_at,
        )
        .select_from(memories.outerjoin(memory_embedding, has_vector))
        .where(memories.c.deleted_at.is_(None), memory_embedding.c.memory_id.is_(None))
        .order_by(memories.c.created_at, memories.c.id)
        .limit(limit)
    )
    if tenant_id is not None:
        query = query.where(memories.c.tenant_id == tenant_id)
    if since is not None:
        query = query.where(memories.c.created_at >= since)
    if refused:
        query = query.where(memories.c.id.not_in(sorted(refused)))
    if after is not None:
        at, memory_id = after
        query = query.where(
            or_(
                memories.c.created_at > at,
                and_(memories.c.created_at == at, memories.c.id > memory_id),
            )
        )
    return (await conn.execute(query)).all()
