"""A user's vectors packed for search (table ``memory_vector_block``): one range read on the
primary key returns the whole matrix of one user and model, ready for a product with the
query, whether or not this process has seen the user before.
Why it works this way: docs/design/vector-blocks.md."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import Counter
from sqlalchemy import Row, and_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from memstream.store.database import in_lists
from memstream.store.embeddings import decode as decode_vector
from memstream.store.schema import long_term_memory, memory_embedding, memory_vector_block

BLOCK_MEMORIES = 1024
"""Memories per block: appending rewrites one block (about 400 KB at 384 dimensions)."""

DEAD = -1  # ``memory_embedding.block`` of a vector whose memory was deleted: never packed

_FIELD, _RECORD = "\x1f", "\x1e"  # ASCII unit and record separators
_SCALE = np.dtype("<f4")

PACKED = Counter(
    "memstream_memory_vectors_packed_total",
    "Memory vectors packed into their user's search blocks.",
)


@dataclass(frozen=True, slots=True, eq=False)
class Matrix:
    """One user's packed vectors: row ``i`` is memory ``ids[i]`` of cube ``cubes[i]``, its
    vector ``codes[i] * scales[i]``."""

    ids: tuple[str, ...]
    cubes: tuple[str, ...]
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.ids)

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Dot products with a unit query vector: cosines, the stored vectors being unit."""
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        # einsum's own loop, not BLAS: OpenBLAS spreads a matrix-vector product over threads
        # that spin while they wait, three times the CPU of one thread on a busy host.
        dots = np.einsum("ij,j->i", self.codes.astype(np.float32), query.astype(np.float32))
        scores: npt.NDArray[np.float32] = dots * self.scales
        return scores


def quantise(
    vectors: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """int8 codes and one scale per row, the row's largest magnitude mapped to 127."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def encode(
    ids: Sequence[str],
    cubes: Sequence[str],
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
) -> tuple[bytes, bytes]:
    """A block's ``ids`` and ``vectors`` columns: the scales, then the codes row by row."""
    if not (len(ids) == len(cubes) == codes.shape[0] == scales.shape[0]):
        raise ValueError("one id, cube, code row and scale per memory")
    records = _RECORD.join(
        f"{memory_id}{_FIELD}{cube}" for memory_id, cube in zip(ids, cubes, strict=True)
    )
    body = np.ascontiguousarray(scales, dtype=_SCALE).tobytes()
    return records.encode(), body + np.ascontiguousarray(codes, dtype=np.int8).tobytes()


def decode(count: int, dims: int, ids: bytes, vectors: bytes) -> Matrix | None:
    """A block read back; None when it does not hold ``count`` memories of ``dims``."""
    if count == 0:
        return Matrix((), (), np.zeros((0, dims), dtype=np.int8), np.zeros(0, dtype=np.float32))
    # One split of the whole text, ids and cubes alternating: a split per record costs
    # several times more at 10,000 memories. A separator inside an id shifts the count.
    text = bytes(ids).decode()
    if text.count(_RECORD) != count - 1:
        return None
    flat = text.replace(_FIELD, _RECORD).split(_RECORD)
    if len(flat) != 2 * count:
        return None
    raw = bytes(vectors)
    if len(raw) != count * (_SCALE.itemsize + dims):
        return None
    split = count * _SCALE.itemsize
    scales = np.frombuffer(raw[:split], dtype=_SCALE).astype(np.float32)
    codes = np.frombuffer(raw[split:], dtype=np.int8).reshape(count, dims)
    return Matrix(tuple(flat[0::2]), tuple(flat[1::2]), codes, scales)


def join(parts: Iterable[Matrix], dims: int) -> Matrix:
    """Blocks as one matrix, in the order given."""
    kept = [m for m in parts if len(m)]
    if not kept:
        return Matrix((), (), np.zeros((0, dims), dtype=np.int8), np.zeros(0, dtype=np.float32))
    if len(kept) == 1:
        return kept[0]
    return Matrix(
        tuple(chain.from_iterable(m.ids for m in kept)),
        tuple(chain.from_iterable(m.cubes for m in kept)),
        np.concatenate([m.codes for m in kept]),
        np.concatenate([m.scales for m in kept]),
    )


def without(matrix: Matrix, gone: set[str]) -> Matrix:
    """``matrix`` less the rows of the ids in ``gone``."""
    keep = [n for n, memory_id in enumerate(matrix.ids) if memory_id not in gone]
    return Matrix(
        tuple(matrix.ids[n] for n in keep),
        tuple(matrix.cubes[n] for n in keep),
        matrix.codes[keep],
        matrix.scales[keep],
    )


# --- reads -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One stored block as read, decoded only once the query's dimension is known."""

    dims: int
    memories: int
    ids: bytes
    vectors: bytes


def _of_user(tenant_id: str, user_id: str, model: str) -> tuple[Any, ...]:
    """The blocks of one user's vectors of ``model``."""
    return (
        memory_vector_block.c.tenant_id == tenant_id,
        memory_vector_block.c.user_id == user_id,
        memory_vector_block.c.model == model,
    )


async def load(conn: AsyncConnection, tenant_id: str, user_id: str, model: str) -> list[Block]:
    """The user's blocks of ``model``: one range read on the primary key."""
    query = (
        select(
            memory_vector_block.c.dims,
            memory_vector_block.c.memories,
            memory_vector_block.c.ids,
            memory_vector_block.c.vectors,
        )
        .where(*_of_user(tenant_id, user_id, model))
        .order_by(memory_vector_block.c.block)
    )
    return [
        Block(int(row.dims), int(row.memories), bytes(row.ids), bytes(row.vectors))
        for row in (await conn.execute(query)).all()
    ]


def matrix_of(found: Iterable[Block], dims: int) -> Matrix:
    """The vectors of ``dims`` dimensions in ``found`` as one matrix (a block written wrong
    is left out, never misread)."""
    decoded = (decode(x.memories, dims, x.ids, x.vectors) for x in found if x.dims == dims)
    return join((m for m in decoded if m is not None), dims)


# --- writes ------------------------------------------------------------------------------


async def pack(engine: AsyncEngine, *, limit: int = 2000, tenant_id: str | None = None) -> int:
    """Pack up to ``limit`` stored vectors not in a block yet into their users' blocks;
    vectors of deleted memories are marked never to be packed. Answers how many it packed."""
    query = (
        select(memory_embedding.c.tenant_id, memory_embedding.c.user_id, memory_embedding.c.model)
        .where(memory_embedding.c.block.is_(None))
        .group_by(
            memory_embedding.c.tenant_id, memory_embedding.c.user_id, memory_embedding.c.model
        )
        .limit(limit)
    )
    if tenant_id is not None:
        query = query.where(memory_embedding.c.tenant_id == tenant_id)
    async with engine.connect() as conn:
        groups = (await conn.execute(query)).all()
    packed = 0
    for tenant, user, model in groups:
        if packed >= limit:
            break
        async with engine.begin() as conn:
            packed += await _pack_user(conn, tenant, user, model, limit - packed)
    PACKED.inc(packed)
    return packed


async def _pack_user(
    conn: AsyncConnection, tenant_id: str, user_id: str, model: str, limit: int
) -> int:
    scope = (
        memory_embedding.c.tenant_id == tenant_id,
        memory_embedding.c.user_id == user_id,
        memory_embedding.c.model == model,
        memory_embedding.c.block.is_(None),
    )
    # The vector rows first, and only them (a delete of these memories waits, or is waited
    # for); the memories are read without a lock.
    lock = (
        select(memory_embedding.c.memory_id)
        .where(*scope)
        .order_by(memory_embedding.c.created_at, memory_embedding.c.memory_id)
    )
    locked = [r.memory_id for r in (await conn.execute(lock.limit(limit).with_for_update())).all()]
    if not locked:
        return 0
    rows: list[Row[Any]] = []
    for chunk in in_lists(locked):
        query = (
            select(
                memory_embedding.c.memory_id,
                memory_embedding.c.dims,
                memory_embedding.c.vector,
                long_term_memory.c.cube_id,
                long_term_memory.c.deleted_at,
            )
            .select_from(
                memory_embedding.outerjoin(
                    long_term_memory,
                    and_(
                        long_term_memory.c.id == memory_embedding.c.memory_id,
                        long_term_memory.c.tenant_id == tenant_id,
                    ),
                )
            )
            .where(*scope, memory_embedding.c.memory_id.in_(chunk))
            .order_by(memory_embedding.c.created_at, memory_embedding.c.memory_id)
        )
        rows += (await conn.execute(query)).all()
    dead = [r.memory_id for r in rows if r.cube_id is None or r.deleted_at is not None]
    await _mark(conn, model, dead, DEAD)
    live = [r for r in rows if r.cube_id is not None and r.deleted_at is None]
    by_dims: dict[int, list[tuple[str, str, npt.NDArray[np.float32]]]] = defaultdict(list)
    for row in live:
        vector = decode_vector(bytes(row.vector), int(row.dims))
        if vector is None:
            await _mark(conn, model, [row.memory_id], DEAD)  # written wrong: never packed
            continue
        by_dims[int(row.dims)].append((row.memory_id, row.cube_id, vector))
    packed = 0
    for dims, found in by_dims.items():
        packed += await _append(conn, tenant_id, user_id, model, dims, found)
    return packed


async def _append(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    model: str,
    dims: int,
    found: Sequence[tuple[str, str, npt.NDArray[np.float32]]],
) -> int:
    """Append vectors to the user's last block of ``dims`` while it has room, then to new ones."""
    scope = _of_user(tenant_id, user_id, model)
    newest = (
        select(memory_vector_block)
        .where(*scope)
        .order_by(memory_vector_block.c.block.desc())
        .limit(1)
        .with_for_update()
    )
    last = (await conn.execute(newest)).first()
    codes, scales = quantise(np.stack([vector for _, _, vector in found]))
    ids = [memory_id for memory_id, _, _ in found]
    cubes = [cube for _, cube, _ in found]
    start = 0
    if last is not None and int(last.dims) == dims and int(last.memories) < BLOCK_MEMORIES:
        held = decode(int(last.memories), dims, last.ids, last.vectors)
        if held is not None:
            room = BLOCK_MEMORIES - len(held)
            merged = join(
                [held, Matrix(tuple(ids[:room]), tuple(cubes[:room]), codes[:room], scales[:room])],
                dims,
            )
            await _write(conn, scope, int(last.block), merged, dims, replace=True)
            await _mark(conn, model, ids[:room], int(last.block))
            start = room
    number = -1 if last is None else int(last.block)
    while start < len(ids):
        number += 1
        end = start + BLOCK_MEMORIES
        part = Matrix(
            tuple(ids[start:end]), tuple(cubes[start:end]), codes[start:end], scales[start:end]
        )
        values = {"tenant_id": tenant_id, "user_id": user_id, "model": model, "block": number}
        await _write(conn, scope, number, part, dims, replace=False, values=values)
        await _mark(conn, model, ids[start:end], number)
        start = end
    return len(ids)


async def _write(
    conn: AsyncConnection,
    scope: tuple[ColumnElement[bool], ...],
    number: int,
    matrix: Matrix,
    dims: int,
    *,
    replace: bool,
    values: dict[str, object] | None = None,
) -> None:
    ids, vectors = encode(matrix.ids, matrix.cubes, matrix.codes, matrix.scales)
    body = {"dims": dims, "memories": len(matrix), "ids": ids, "vectors": vectors}
    if replace:
        await conn.execute(
            update(memory_vector_block)
            .where(*scope, memory_vector_block.c.block == number)
            .values(**body)
        )
    else:
        await conn.execute(insert(memory_vector_block).values(**(values or {}), **body))


async def _mark(conn: AsyncConnection, model: str, ids: Sequence[str], block: int) -> None:
    for chunk in in_lists(ids):
        await conn.execute(
            update(memory_embedding)
            .where(memory_embedding.c.model == model, memory_embedding.c.memory_id.in_(chunk))
            .values(block=block)
        )


async def unpack(conn: AsyncConnection, tenant_id: str, memory_ids: Sequence[str]) -> None:
    """Take deleted memories' vectors out of their blocks (in the deleting transaction)."""
    if not memory_ids:
        return
    by_block: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for chunk in in_lists(memory_ids):
        query = (
            select(
                memory_embedding.c.memory_id,
                memory_embedding.c.user_id,
                memory_embedding.c.model,
                memory_embedding.c.block,
            )
            .where(
                memory_embedding.c.tenant_id == tenant_id, memory_embedding.c.memory_id.in_(chunk)
            )
            .with_for_update()
        )
        for held_by in (await conn.execute(query)).all():
            if held_by.block is not None and int(held_by.block) >= 0:
                by_block[(held_by.user_id, held_by.model, int(held_by.block))].add(
                    held_by.memory_id
                )
        await conn.execute(
            update(memory_embedding)
            .where(
                memory_embedding.c.tenant_id == tenant_id, memory_embedding.c.memory_id.in_(chunk)
            )
            .values(block=DEAD)
        )
    for (user_id, model, number), gone in sorted(by_block.items()):
        scope = _of_user(tenant_id, user_id, model)
        locked = (
            select(memory_vector_block)
            .where(*scope, memory_vector_block.c.block == number)
            .with_for_update()
        )
        row = (await conn.execute(locked)).first()
        held = None if row is None else decode(row.memories, row.dims, row.ids, row.vectors)
        if row is not None and held is not None:
            await _write(conn, scope, number, without(held, gone), int(row.dims), replace=True)


async def drop_user(conn: AsyncConnection, tenant_id: str, user_id: str) -> None:
    """Drop every block of a user (a forget), and mark their vectors never to be packed."""
    await conn.execute(
        update(memory_embedding)
        .where(memory_embedding.c.tenant_id == tenant_id, memory_embedding.c.user_id == user_id)
        .values(block=DEAD)
    )
    await conn.execute(
        delete(memory_vector_block).where(
            memory_vector_block.c.tenant_id == tenant_id, memory_vector_block.c.user_id == user_id
        )
    )


async def count(conn: AsyncConnection, tenant_id: str, user_id: str, model: str) -> int:
    """Vectors in the user's blocks of ``model`` (tests, the benchmark)."""
    query = select(func.coalesce(func.sum(memory_vector_block.c.memories), 0)).where(
        *_of_user(tenant_id, user_id, model)
    )
    return int((await conn.execute(query)).scalar_one())
