"""The built-in long-term store (provider ``MYSQL``): table ``long_term_memory`` plus an
in-memory lexical index per user (memstream.retrieval), on MySQL/MariaDB or SQLite; with an
embeddings endpoint configured, lexical and vector ranks fused (memstream.embeddings).

Writes go straight to the table. Searches run on a per-(tenant, user) ``LexicalIndex`` kept
in a bounded LRU cache and refreshed only when that user's memories changed, so the load
path pays one small indexed query plus an in-memory BM25 pass instead of reading and
tokenizing every memory on every request.

Freshness check (why row counts and not a version row or ``MAX(updated_at)``):
    Every search first runs ``SELECT COUNT(*), COUNT(deleted_at) WHERE tenant_id = ? AND
    user_id = ?``, answered from the existing ``ix_memory_scope`` index alone (``deleted_at``
    is its last column). Rows of this table are never rewritten in place: ``add`` only
    inserts (a duplicate is a no-op) and a soft delete turns a live row into a deleted one,
    never back. So every change to the live set moves the pair: an insert raises the first
    count, a delete the second. The pair is exact and needs no clock (``MAX(updated_at)``
    would compare the clocks of different hosts and need a new column), and it sees writes
    from every process and every code path that writes the table (the worker writes, the API
    reads), which a per-user version row bumped by this class would not. The price: the
    count walks the user's index entries, about 0.5 ms more than a point lookup at 1,000
    memories on MariaDB. The one change it cannot see, a hard DELETE plus an insert between
    two checks, is caught by re-reading the live id set when an entry is older than
    ``revalidate_seconds``.

    When the pair moved, one statement reads it again with the live ids (joined in one
    string), and only the memories the cache lacks are fetched and indexed; removed ones are
    dropped from the index. A cold load or a big change is tokenized and indexed in a worker
    thread so that other requests keep being served.

    With ``fresh_seconds`` (the query API's load path: ``MEMSTREAM_LONG_TERM_FRESH_SECONDS``)
    an index checked that recently is used without checking again: the check is the load
    path's only database round trip, and a memory the worker wrote then reaches searches
    within that time at most. This process's own writes mark the user's index unchecked at
    once, so an API client reads what it wrote.

Vectors (with an embeddings client):
    Vectors live in their own table, ``memory_embedding`` (one row per memory and model),
    written after the memory by the worker's backfill (memstream.embeddings.backfill) so a
    slow or absent endpoint never holds up a write. A column of ``long_term_memory`` would
    be filled in by an UPDATE, which moves neither count: the check above would miss it, and
    the argument that rows are never rewritten would no longer hold. A separate insert-only
    table keeps it: the same statement also counts the user's vectors of the model (a third
    count from ``ix_embedding_user``), which only grows, so a new vector is seen like a new
    memory. The user's vectors are cached as one float32 matrix in a ``VectorCache`` bounded
    by bytes (a user with 10,000 memories of 384 dimensions holds 15 MB); when the counts
    move, only the vectors of memories the matrix lacks are read.

    A search embeds the query (at most ``query_timeout`` seconds, started before the counts
    are read so the two overlap), ranks the readable memories by cosine and fuses the two
    rankings (memstream.embeddings.fusion). A memory without a vector is still found
    lexically. When the query cannot be embedded, the search answers lexically, counts the
    failure, notes ``"embeddings"`` for the load path's ``degraded``
    (memstream.providers.degraded) and tries the endpoint again only after
    ``embedding_retry_seconds``, so an outage costs one timeout now and then, not one per
    request.

Re-adding deleted content: the unique key (tenant_id, user_id, cube_id, content_hash) also
covers deleted rows, so a soft delete sets the row's ``content_hash`` to its own ``id`` (a
tombstone that can never equal a SHA-256 of content); the same content can be stored again
later as a new memory with a new id, and a deleted id never comes back to life.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import logging
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt
from sqlalchemy import Insert, Row, case, func, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.embeddings import rows as vector_rows
from memstream.embeddings.cache import UserVectors, VectorCache
from memstream.embeddings.client import EmbeddingClient
from memstream.embeddings.fusion import RRF_K, VECTOR_WEIGHT, entered_by_rank, fuse
from memstream.memory import (
    MEMORY_TYPES,
    USER_PROFILE,
    MemoryItem,
    MemoryKind,
    MemoryType,
    NewMemory,
    readable_cubes,
)
from memstream.providers import degraded
from memstream.providers.http import PROVIDER_FAILURES
from memstream.providers.identity import content_hash
from memstream.retrieval import MMR_LAMBDA, RELATIVITY, LexicalIndex, mmr, normalised
from memstream.store.schema import long_term_memory as t
from memstream.store.schema import memory_embedding as e
from memstream.text.normalise import fold_spaces_and_case
from memstream.text.terms import tokenize

log = logging.getLogger(__name__)

_CHUNK = 500  # ids per IN (...) list
# Up to this many added plus removed memories are applied to a cached index in place on the
# event loop (about 30 µs each); a cold load or a bigger change is built in a worker thread.
INLINE_UPDATE_LIMIT = 100
# Up to this many memories lacking a vector in the cached matrix are looked up by id; more
# (a cold cache, embeddings just switched on) read all of the user's vectors at once.
VECTOR_LOOKUP_LIMIT = 2_000
MEMORY_KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


_COLUMNS = (
    t.c.id,
    t.c.tenant_id,
    t.c.user_id,
    t.c.agent_id,
    t.c.cube_id,
    t.c.memory_type,
    t.c.content,
    t.c.importance,
    t.c.source_event_ids,
    t.c.created_at,
    t.c.kind,
    t.c.occurred_at,
)


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


def _item(row: Row[Any]) -> MemoryItem:
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


# (memories, deleted memories) of a user, what the lexical index follows; then the same plus
# the user's vectors of the embedding model, what the vector matrix follows. Each only grows.
Counts = tuple[int, int]
Fingerprint = tuple[int, int, int]


@dataclass(slots=True)
class _UserIndex:
    """One user's live memories (all cubes, by id) and their index."""

    fingerprint: Counts
    items: dict[str, MemoryItem]
    index: LexicalIndex
    checked_at: float = field(default_factory=time.monotonic)
    # When the counts last matched the table (never: 0), and those counts with the vectors'.
    verified_at: float = 0.0
    verified: Fingerprint = (0, 0, 0)
    counted: int = 0  # memories this entry adds to the cache's total (set by _store)


class MySQLProvider:
    """``LongTermProvider`` over ``long_term_memory`` (MySQL/MariaDB or SQLite)."""

    name = "MYSQL"

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        relativity: float = RELATIVITY,
        mmr_lambda: float = MMR_LAMBDA,
        cache_users: int = 1024,
        cache_memories: int = 250_000,
        revalidate_seconds: float = 300.0,
        fresh_seconds: float = 0.0,
        embedder: EmbeddingClient | None = None,
        vector_cache_bytes: int = 64 * 1024 * 1024,
        query_timeout: float = 0.4,
        embedding_retry_seconds: float = 2.0,
        vector_weight: float = VECTOR_WEIGHT,
        fusion: Literal["rrf", "weighted"] = "weighted",
        rrf_k: int = RRF_K,
    ) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name
        if self._dialect not in ("mysql", "mariadb", "sqlite"):
            raise ValueError(f"unsupported database dialect {self._dialect!r}")
        self.relativity = relativity
        self.mmr_lambda = mmr_lambda
        self._cache_users = cache_users
        self._cache_memories = cache_memories
        self._revalidate = revalidate_seconds
        self._fresh = fresh_seconds
        self._cache: OrderedDict[tuple[str, str], _UserIndex] = OrderedDict()
        self._cached_memories = 0
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self.rebuilds = 0  # index (re)builds, for tests and metrics
        self.embedder = embedder
        self.vectors = VectorCache(vector_cache_bytes)
        self.query_timeout = query_timeout
        self.embedding_retry_seconds = embedding_retry_seconds
        self.vector_weight = vector_weight
        self.fusion: Literal["rrf", "weighted"] = fusion
        self.rrf_k = rrf_k
        self._embeddings_retry_at = 0.0  # monotonic time before which queries are not embedded
        self._vector_locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    # --- writes --------------------------------------------------------------------------

    def _insert_ignore(self) -> Insert:
        # A row whose (tenant_id, user_id, cube_id, content_hash) is already stored is left as
        # it is: the statement is a no-op for it, never an error.
        if self._dialect == "sqlite":
            return sqlite.insert(t).on_conflict_do_nothing()
        stmt = mysql.insert(t)
        return stmt.on_duplicate_key_update(content_hash=stmt.inserted.content_hash)

    async def add(self, memories: Sequence[NewMemory]) -> list[MemoryItem]:
        """Store memories; content already live in the same cube (after normalisation) is not
        stored again, the stored item is answered instead. Answers one item per input."""
        if not memories:
            return []
        keys: list[tuple[str, str, str, str]] = []
        rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        now = _now()
        for n, memory in enumerate(memories):
            # One microsecond apart: the batch keeps its order in time (newest-first lists,
            # ties in search), deterministically.
            row = _new_row(memory, now + timedelta(microseconds=n))
            key = (row["tenant_id"], row["user_id"], row["cube_id"], row["content_hash"])
            keys.append(key)
            rows.setdefault(key, row)
        stored: dict[tuple[str, str, str, str], MemoryItem] = {}
        async with self._engine.begin() as conn:
            # Key order: concurrent batches take the unique-key locks in the same order.
            pending = [rows[k] for k in sorted(rows)]
            for _attempt in range(2):
                await conn.execute(self._insert_ignore(), pending)
                found, dead = await self._read_back(conn, pending)
                stored.update(found)
                if not dead:
                    break
                # Rows deleted by code that did not leave a tombstone still hold the key.
                for tenant, dead_id in dead:
                    await conn.execute(
                        update(t)
                        .where(t.c.tenant_id == tenant, t.c.id == dead_id)
                        .values(content_hash=t.c.id)
                    )
                pending = [rows[k] for k in sorted(rows) if k not in stored]
        for tenant_id, user_id in {(k[0], k[1]) for k in keys}:
            self._unverify(tenant_id, user_id)
        missing = [k for k in keys if k not in stored]
        if missing:
            raise RuntimeError(f"memories not stored: {missing[:3]}")
        return [stored[k] for k in keys]

    async def _read_back(
        self, conn: AsyncConnection, rows: Sequence[dict[str, Any]]
    ) -> tuple[dict[tuple[str, str, str, str], MemoryItem], list[tuple[str, str]]]:
        """The live stored row behind each new row's key, and ids of deleted key holders."""
        wanted = {(r["tenant_id"], r["user_id"], r["cube_id"], r["content_hash"]) for r in rows}
        by_cube: dict[tuple[str, str, str], list[str]] = {}
        for tenant, user, cube, digest in sorted(wanted):
            by_cube.setdefault((tenant, user, cube), []).append(digest)
        found: dict[tuple[str, str, str, str], MemoryItem] = {}
        dead: list[tuple[str, str]] = []
        for (tenant, user, cube), digests in by_cube.items():
            for chunk in _chunks(digests):
                # Point lookups on the unique key.
                query = select(*_COLUMNS, t.c.content_hash, t.c.deleted_at).where(
                    t.c.tenant_id == tenant,
                    t.c.user_id == user,
                    t.c.cube_id == cube,
                    t.c.content_hash.in_(chunk),
                )
                for row in (await conn.execute(query)).all():
                    key = (row.tenant_id, row.user_id, row.cube_id, row.content_hash)
                    if row.deleted_at is not None:
                        dead.append((row.tenant_id, row.id))
                    else:
                        found[key] = _item(row)
        return found, dead

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> list[str]:
        """Soft-delete memories of ``tenant_id`` by id; answers the ids that were live."""
        deleted: list[str] = []
        async with self._engine.begin() as conn:
            for chunk in _chunks(sorted(set(ids))):
                scope = (t.c.tenant_id == tenant_id, t.c.id.in_(chunk), t.c.deleted_at.is_(None))
                deleted += await self._expire(conn, scope)
        if deleted:
            self._unverify(tenant_id)  # the ids do not say whose they were
        return deleted

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user: soft-delete every live memory of every cube; answers their ids."""
        scope = (t.c.tenant_id == tenant_id, t.c.user_id == user_id, t.c.deleted_at.is_(None))
        async with self._engine.begin() as conn:
            deleted = await self._expire(conn, scope)
        self._evict((tenant_id, user_id))
        self.vectors.discard((tenant_id, user_id))
        return deleted

    async def _expire(self, conn: AsyncConnection, scope: tuple[Any, ...]) -> list[str]:
        # Lock the rows first so that two concurrent deletes never both report the same id
        # (SQLite ignores FOR UPDATE: its writers are serialised anyway).
        query = select(t.c.id).where(*scope).with_for_update()
        ids = [row.id for row in (await conn.execute(query)).all()]
        if ids:
            # The tombstone frees the content key (module docstring).
            await conn.execute(
                update(t).where(*scope).values(deleted_at=_now(), content_hash=t.c.id)
            )
        return ids

    # --- reads ---------------------------------------------------------------------------

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> list[MemoryItem]:
        """Every live memory of the readable cubes, newest first."""
        query = (
            select(*_COLUMNS)
            .where(
                t.c.tenant_id == tenant_id,
                t.c.user_id == user_id,
                t.c.cube_id.in_(readable_cubes(agent_id)),
                t.c.deleted_at.is_(None),
            )
            .order_by(t.c.created_at.desc(), t.c.id)
        )
        async with self._engine.connect() as conn:
            return [_item(row) for row in (await conn.execute(query)).all()]

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        *,
        top_k: int = 10,
    ) -> list[MemoryItem]:
        """Up to ``top_k`` live memories per readable cube scoring at least the relativity
        threshold, near-duplicates removed by MMR; all of them sorted by score. Lexical, or
        hybrid with an embeddings client (module docstring); never fails for the embeddings."""
        if top_k <= 0 or not query.strip():
            return []
        terms = tokenize(query)
        embedding = self._embed_query(query)
        try:
            if not terms and embedding is None:
                return []
            entry, fingerprint = await self._user_index(tenant_id, user_id)
            if not entry.items:
                return []
            cubes = readable_cubes(agent_id)
            query_vector = await self._query_vector(embedding) if embedding else None
            if query_vector is None:
                return _rank_lexical(entry, terms, cubes, top_k, self.relativity, self.mmr_lambda)
            vectors = await self._user_vectors(
                tenant_id, user_id, entry, fingerprint, int(query_vector.shape[0])
            )
            return _rank_hybrid(entry, terms, query_vector, vectors, cubes, top_k, self)
        finally:
            if embedding is not None:
                embedding[0].cancel()

    # --- vectors -------------------------------------------------------------------------

    def _embed_query(
        self, query: str
    ) -> tuple[asyncio.Task[npt.NDArray[np.float32]], float] | None:
        """The query's embedding, started now, and the loop time it must be done by; None
        without a client, or while the endpoint is left alone after a failure."""
        if self.embedder is None:
            return None
        if time.monotonic() < self._embeddings_retry_at:
            degraded.note("embeddings")
            return None
        loop = asyncio.get_running_loop()
        return loop.create_task(self.embedder.embed_one(query)), loop.time() + self.query_timeout

    async def _query_vector(
        self, embedding: tuple[asyncio.Task[npt.NDArray[np.float32]], float]
    ) -> npt.NDArray[np.float32] | None:
        task, deadline = embedding
        try:
            async with asyncio.timeout_at(deadline):
                return await task
        except Exception as exc:  # whatever went wrong, the search answers lexically
            self._embeddings_retry_at = time.monotonic() + self.embedding_retry_seconds
            detail = "no answer in time" if isinstance(exc, TimeoutError) else repr(exc)
            log.warning("query embedding failed (%s); searching lexically", detail)
            PROVIDER_FAILURES.labels(self.name, "embed_query").inc()
            degraded.note("embeddings")
            return None

    async def _user_vectors(
        self,
        tenant_id: str,
        user_id: str,
        entry: _UserIndex,
        fingerprint: Fingerprint,
        dims: int,
    ) -> UserVectors:
        """The vectors of the user's live memories (those that have one), from the cache when
        its version is this fingerprint, else refreshed: only missing vectors are read."""
        assert self.embedder is not None
        key = (tenant_id, user_id)
        version = (fingerprint, dims)
        cached = self.vectors.get(key)
        if cached is not None and cached.version == version:
            return cached
        lock = self._vector_locks.get(key)
        if lock is None:
            lock = self._vector_locks[key] = asyncio.Lock()
        async with lock:
            cached = self.vectors.get(key)
            if cached is not None and cached.version == version:
                return cached
            live = set(entry.items)
            kept: list[int] = []
            ids: list[str] = []
            if cached is not None and cached.vectors.shape[1] == dims:
                for row, memory_id in enumerate(cached.ids):
                    if memory_id in live:
                        kept.append(row)
                        ids.append(memory_id)
            held = set(ids)
            missing = sorted(live - held)
            model = self.embedder.model
            async with self._engine.connect() as conn:
                if cached is None or len(missing) > VECTOR_LOOKUP_LIMIT:
                    found_ids, found = await vector_rows.load(conn, tenant_id, user_id, model, dims)
                    kept, ids = [], []
                elif missing:
                    found_ids, found = await vector_rows.load(
                        conn, tenant_id, user_id, model, dims, missing
                    )
                else:
                    found_ids, found = [], np.zeros((0, dims), dtype=np.float32)
            wanted = [n for n, memory_id in enumerate(found_ids) if memory_id in live]
            parts = [found[wanted]]
            if kept and cached is not None:
                parts.insert(0, cached.vectors[kept])
            ids += [found_ids[n] for n in wanted]
            return self.vectors.put(key, ids, np.concatenate(parts), version)

    # --- the per-user index cache --------------------------------------------------------

    async def _fingerprint(
        self, conn: AsyncConnection, tenant_id: str, user_id: str
    ) -> Fingerprint:
        columns: list[Any] = [func.count(), func.count(t.c.deleted_at)]
        if self.embedder is not None:
            # The vector count in the same statement: one round trip, one consistent view.
            columns.append(
                select(func.count())
                .select_from(e)
                .where(
                    e.c.tenant_id == tenant_id,
                    e.c.user_id == user_id,
                    e.c.model == self.embedder.model,
                )
                .scalar_subquery()
            )
        query = select(*columns).where(t.c.tenant_id == tenant_id, t.c.user_id == user_id)
        row = (await conn.execute(query)).one()
        return int(row[0]), int(row[1]), int(row[2]) if len(row) > 2 else 0

    def _unverify(self, tenant_id: str, user_id: str | None = None) -> None:
        """The next search of these users (all of the tenant's) checks the table again."""
        for (tenant, user), entry in self._cache.items():
            if tenant == tenant_id and user_id in (None, user):
                entry.verified_at = 0.0

    async def _user_index(self, tenant_id: str, user_id: str) -> tuple[_UserIndex, Fingerprint]:
        """The user's lexical index, fresh, and the fingerprint it was checked against."""
        key = (tenant_id, user_id)
        entry = self._cache.get(key)
        if entry is not None and time.monotonic() - entry.verified_at < self._fresh:
            self._cache.move_to_end(key)
            return entry, entry.verified
        async with self._engine.connect() as conn:
            fingerprint = await self._fingerprint(conn, tenant_id, user_id)
        entry = self._cache.get(key)
        counts: Counts = fingerprint[:2]
        if entry is not None and self._usable(entry, counts, exact=True):
            self._cache.move_to_end(key)
            entry.verified_at, entry.verified = time.monotonic(), fingerprint
            return entry, fingerprint
        # One load per user at a time; the others wait for it instead of loading the same.
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            entry = self._cache.get(key)
            # Loaded while this request waited, so from a fingerprint read after this one's.
            if entry is not None and self._usable(entry, counts, exact=False):
                self._cache.move_to_end(key)
                return entry, (*entry.fingerprint, fingerprint[2])
            async with self._engine.connect() as conn:
                counts, live_ids, added = await self._changes(conn, tenant_id, user_id, entry)
            changes = (
                len(added) if entry is None else 2 * len(added) + len(entry.items) - len(live_ids)
            )
            if entry is None or changes > INLINE_UPDATE_LIMIT:
                # A cold load or a big change: tokenize and build off the event loop.
                entry = await asyncio.to_thread(_build, counts, live_ids, added, entry)
                # Out of the collector's way: every full collection would walk the index's
                # objects again (80,000 at 20 users of 1,000 memories, a 100 ms pause). Frozen
                # objects are still freed by their reference counts when the index goes; the
                # young generations are collected first so no garbage is frozen with them.
                gc.collect(1)
                gc.freeze()
            else:
                _update(entry, counts, live_ids, added)
            self.rebuilds += 1
            self._store(key, entry)
            # The vector count read before the live set: never newer than the vectors read
            # after it, so a vector matrix tagged with it is refreshed rather than kept stale.
            entry.verified_at, entry.verified = time.monotonic(), (*counts, fingerprint[2])
            return entry, entry.verified

    def _usable(self, entry: _UserIndex, fingerprint: Counts, *, exact: bool) -> bool:
        if time.monotonic() - entry.checked_at >= self._revalidate:
            return False
        if exact:
            return entry.fingerprint == fingerprint
        # Both counts only grow under this class's writes (module docstring).
        return entry.fingerprint[0] >= fingerprint[0] and entry.fingerprint[1] >= fingerprint[1]

    async def _changes(
        self, conn: AsyncConnection, tenant_id: str, user_id: str, old: _UserIndex | None
    ) -> tuple[Counts, list[str], list[MemoryItem]]:
        """Fresh counts, the live ids and the live memories ``old`` lacks.

        The fingerprint and the live ids come from one statement (one consistent view), the
        ids joined into one string: aiomysql decodes a thousand one-column rows in about
        4 ms, one string in well under one. Rows read afterwards may be newer than the
        fingerprint, which costs one more refresh later, never a stale hit."""
        if self._dialect != "sqlite" and not conn.info.get("memstream_group_concat"):
            # MySQL 8 caps GROUP_CONCAT at 1,024 bytes by default (MariaDB at 1 MB); the
            # setting lives as long as the pooled connection.
            await conn.exec_driver_sql("SET SESSION group_concat_max_len = 16777216")
            conn.info["memstream_group_concat"] = True
        live_id = case((t.c.deleted_at.is_(None), t.c.id))
        query = select(func.count(), func.count(t.c.deleted_at), func.group_concat(live_id)).where(
            t.c.tenant_id == tenant_id, t.c.user_id == user_id
        )
        total, deleted, joined = (await conn.execute(query)).one()
        fingerprint = (int(total), int(deleted))
        live_ids = joined.split(",") if joined else []
        if len(set(live_ids)) != fingerprint[0] - fingerprint[1]:
            # An id with a comma in it, or a truncated list: read them one row each.
            live_query = select(t.c.id).where(
                t.c.tenant_id == tenant_id, t.c.user_id == user_id, t.c.deleted_at.is_(None)
            )
            live_ids = [row.id for row in (await conn.execute(live_query)).all()]
        missing = [i for i in live_ids if old is None or i not in old.items]
        added: list[MemoryItem] = []
        for chunk in _chunks(missing):
            query = select(*_COLUMNS).where(
                t.c.tenant_id == tenant_id, t.c.id.in_(chunk), t.c.deleted_at.is_(None)
            )
            added += [_item(row) for row in (await conn.execute(query)).all()]
        return fingerprint, live_ids, added

    def _store(self, key: tuple[str, str], entry: _UserIndex) -> None:
        self._evict(key)
        entry.counted = len(entry.items)
        self._cache[key] = entry
        self._cached_memories += entry.counted
        while len(self._cache) > 1 and (
            len(self._cache) > self._cache_users or self._cached_memories > self._cache_memories
        ):
            _, dropped = self._cache.popitem(last=False)
            self._cached_memories -= dropped.counted

    def _evict(self, key: tuple[str, str]) -> None:
        dropped = self._cache.pop(key, None)
        if dropped is not None:
            self._cached_memories -= dropped.counted

    def clear_cache(self) -> None:
        self._cache.clear()
        self._cached_memories = 0
        self.vectors.clear()

    async def aclose(self) -> None:
        """Close the embeddings client's connections."""
        if self.embedder is not None:
            await self.embedder.aclose()


def _pool_size(top_k: int) -> int:
    return max(3 * top_k, 30)  # MMR looks at the best candidates only


def _rank_lexical(
    entry: _UserIndex,
    terms: Sequence[str],
    cubes: Sequence[str],
    top_k: int,
    relativity: float,
    mmr_lambda: float,
) -> list[MemoryItem]:
    """Lexical search over one user's index (synchronous: the index cannot change under it)."""
    if not terms:
        return []
    # Rank by relevance (it keeps ordering memories the displayed score caps at 1.0),
    # threshold and show the normalised score.
    floor = relativity * relativity
    by_cube: dict[str, list[tuple[float, str]]] = {c: [] for c in cubes}
    items = entry.items
    for doc_id, value in entry.index.relevance(terms).items():
        if value >= floor and value > 0.0:
            bucket = by_cube.get(items[doc_id].cube_id)
            if bucket is not None:
                bucket.append((value, doc_id))
    picked: list[tuple[float, float, str]] = []
    for candidates in by_cube.values():
        pool = [
            ((value, doc_id), normalised(value), entry.index.token_set(doc_id))
            for value, doc_id in heapq.nlargest(_pool_size(top_k), candidates)
        ]
        for (value, doc_id), score, _tokens in mmr(pool, mmr_lambda, top_k):
            picked.append((score, value, doc_id))
    picked.sort(reverse=True)
    return [replace(items[doc_id], score=round(score, 4)) for score, _, doc_id in picked]


def _rank_hybrid(
    entry: _UserIndex,
    terms: Sequence[str],
    query: npt.NDArray[np.float32],
    vectors: UserVectors,
    cubes: Sequence[str],
    top_k: int,
    options: MySQLProvider,
) -> list[MemoryItem]:
    """Lexical and vector rankings of each readable cube fused (memstream.embeddings.fusion),
    then MMR on the fused scores (synchronous, like ``_rank_lexical``)."""
    items = entry.items
    pool_size = _pool_size(top_k)
    lexical = _best_lexical(entry, terms, cubes, pool_size)
    ids = vectors.ids
    cosines = vectors.cosines(query)
    if _counts_of(vectors) != entry.fingerprint:
        # The index moved on since the matrix was read: only rows of memories still live.
        live = np.fromiter((memory_id in items for memory_id in ids), dtype=bool, count=len(ids))
        rows = np.flatnonzero(live)
        ids, cosines = tuple(ids[n] for n in rows), cosines[rows]
    entered = {ids[n] for n in entered_by_rank(cosines)}
    by_cosine = _best_by_cube(ids, cosines, items, cubes, pool_size)
    picked: list[tuple[float, float, str]] = []
    tokens = entry.index.token_set
    for cube in cubes:
        ranked = [(doc_id, normalised(value)) for doc_id, value in lexical[cube]]
        fused = fuse(
            ranked,
            by_cosine[cube],
            threshold=options.relativity,
            k=options.rrf_k,
            vector_weight=options.vector_weight,
            entered=entered,
            order=options.fusion,
            limit=pool_size,
        )
        pool = [
            ((f.rrf if options.fusion == "rrf" else f.weighted, f.id), f.score, tokens(f.id))
            for f in fused
        ]
        for (value, doc_id), score, _tokens in mmr(pool, options.mmr_lambda, top_k):
            picked.append((score, value, doc_id))
    picked.sort(reverse=True)
    return [replace(items[doc_id], score=round(score, 4)) for score, _, doc_id in picked]


def _best_lexical(
    entry: _UserIndex, terms: Sequence[str], cubes: Sequence[str], size: int
) -> dict[str, list[tuple[str, float]]]:
    """The ``size`` most relevant (id, relevance) pairs of each readable cube, best first."""
    by_cube: dict[str, list[tuple[str, float]]] = {c: [] for c in cubes}
    relevance = entry.index.relevance(terms) if terms else {}
    items = entry.items

    def fill(pairs: Iterable[tuple[str, float]]) -> None:
        for doc_id, value in pairs:
            bucket = by_cube.get(items[doc_id].cube_id)
            if bucket is not None and len(bucket) < size and value > 0.0:
                bucket.append((doc_id, value))

    # A common word matches thousands of a large store's memories: the best few first, all
    # of them only when a cube is still short.
    few = 4 * size * len(cubes)
    head = heapq.nlargest(few, relevance.items(), key=lambda pair: pair[1])
    fill(head)
    if len(relevance) > few and any(len(bucket) < size for bucket in by_cube.values()):
        by_cube = {c: [] for c in cubes}
        fill(sorted(relevance.items(), key=lambda pair: pair[1], reverse=True))
    return by_cube


def _counts_of(vectors: UserVectors) -> Counts | None:
    """The lexical counts a vector matrix was read for (its version's first two counts)."""
    version = vectors.version
    if isinstance(version, tuple) and version and isinstance(version[0], tuple):
        return (version[0][0], version[0][1])
    return None


def _best_by_cube(
    ids: Sequence[str],
    cosines: npt.NDArray[np.float32],
    items: dict[str, MemoryItem],
    cubes: Sequence[str],
    size: int,
) -> dict[str, list[tuple[str, float]]]:
    """The ``size`` best (id, cosine) pairs of each readable cube, best first."""
    by_cube: dict[str, list[tuple[str, float]]] = {c: [] for c in cubes}

    def fill(rows: npt.NDArray[np.intp]) -> None:
        for n in rows[np.argsort(-cosines[rows], kind="stable")]:
            bucket = by_cube.get(items[ids[n]].cube_id)
            if bucket is not None and len(bucket) < size:
                bucket.append((ids[n], float(cosines[n])))

    # A partial sort finds the best rows of a large matrix; the others are read only when a
    # cube is still short (its memories are few, or rank low).
    few = 4 * size * len(cubes)
    if len(ids) <= few:
        fill(np.arange(len(ids)))
        return by_cube
    head = np.argpartition(-cosines, few - 1)[:few]
    fill(head)
    if any(len(bucket) < size for bucket in by_cube.values()):
        rest = np.ones(len(ids), dtype=bool)
        rest[head] = False
        fill(np.flatnonzero(rest))
    return by_cube


def _build(
    fingerprint: Counts,
    live_ids: Sequence[str],
    added: Sequence[MemoryItem],
    old: _UserIndex | None,
) -> _UserIndex:
    """A new entry from scratch, reusing the tokens of memories ``old`` already holds
    (runs in a worker thread: it reads ``old`` and builds new objects only)."""
    live = set(live_ids)
    kept = [] if old is None else [i for i in old.items.values() if i.id in live]
    docs: list[tuple[MemoryItem, str | Sequence[str]]] = [
        (item, old.index.tokens(item.id)) for item in kept if old is not None
    ]
    docs += [(item, item.content) for item in added]
    # Oldest first: on equal scores the index ranks the earlier added first.
    docs.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    index = LexicalIndex((item.id, body) for item, body in docs)
    return _UserIndex(fingerprint, {item.id: item for item, _ in docs}, index)


def _update(
    entry: _UserIndex,
    fingerprint: Counts,
    live_ids: Sequence[str],
    added: Sequence[MemoryItem],
) -> None:
    """Apply a small change in place (synchronous: no search sees it half done)."""
    live = set(live_ids)
    for gone in [i for i in entry.items if i not in live]:
        entry.index.remove(gone)
        del entry.items[gone]
    for item in sorted(added, key=lambda i: (i.created_at, i.id)):
        entry.index.add(item.id, item.content)
        entry.items[item.id] = item
    entry.fingerprint = fingerprint
    entry.checked_at = time.monotonic()


def _new_row(memory: NewMemory, now: datetime) -> dict[str, Any]:
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
        "created_at": now,
        "deleted_at": None,
        "kind": memory.kind,
        "occurred_at": _naive_utc(memory.occurred_at),
    }


def _chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]
