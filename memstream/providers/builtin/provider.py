"""The built-in long-term store (provider ``MYSQL``): table ``long_term_memory`` with its
stored postings, on MySQL/MariaDB or SQLite; with an embeddings endpoint configured, the
lexical ranking fused with a vector ranking over the user's packed vectors. No search needs
a per-process warm-up. Why it is built this way: docs/design/builtin-store.md."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.changes.model import API, FORGET, Cause, added, removed
from memstream.embeddings.client import EmbeddingClient
from memstream.embeddings.fusion import RRF_K, VECTOR_WEIGHT
from memstream.memory import MemoryItem, NewMemory, readable_cubes
from memstream.providers import degraded
from memstream.providers.builtin import ranking, warm
from memstream.providers.builtin.index_cache import RecentSearches, search_terms
from memstream.providers.builtin.ranking import (
    hybrid_candidates,
    pick_hybrid,
    pick_lexical,
)
from memstream.providers.builtin.warm import WarmUsers
from memstream.providers.http import PROVIDER_FAILURES
from memstream.retrieval import (
    MMR_LAMBDA,
    RELATIVITY,
    DocumentTerms,
    document_terms,
    length_norms,
    query_terms,
    relevance,
)
from memstream.store import memory_rows, postings, prepared, stamps, turns, vector_blocks
from memstream.store.database import in_lists
from memstream.store.memory_rows import ContentKey
from memstream.store.outbox import ChangeOutbox
from memstream.store.prepared import Prepared
from memstream.store.reads import Reads
from memstream.store.schema import TERM_CHARS
from memstream.text.dates import dated_query
from memstream.text.terms import phrases, tokenize

log = logging.getLogger(__name__)

# A hybrid search scoring more postings and vectors than this ranks in a worker thread so
# that the loop keeps serving other requests (about a millisecond of work: smaller
# ones stay inline, a thread hop would cost more than it saves).
INLINE_WORK = 2_000

MAX_WARMING = 2
"""Users loaded into the warm layer at once at most (``warm.py``)."""


class BuiltinProvider:
    """``LongTermProvider`` over ``long_term_memory`` (MySQL/MariaDB or SQLite)."""

    name = "MYSQL"

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        relativity: float = RELATIVITY,
        mmr_lambda: float = MMR_LAMBDA,
        fresh_seconds: float = 0.0,
        embedder: EmbeddingClient | None = None,
        query_timeout: float = 0.4,
        embedding_retry_seconds: float = 2.0,
        vector_weight: float = VECTOR_WEIGHT,
        fusion: Literal["rrf", "weighted"] = "weighted",
        rrf_k: int = RRF_K,
        reads: Reads | None = None,
        postings_budget: int = postings.POSTINGS_BUDGET,
        changes: ChangeOutbox | None = None,
        search_history: bool = True,
        warm_memories: int = 0,
        warm_after: int = 3,
    ) -> None:
        self._engine = engine
        # Every change is recorded in the outbox in the transaction that makes it.
        self.changes = changes if changes is not None else ChangeOutbox()
        # Writes go to ``engine``; reads to the replica unless this process wrote for the user.
        self._reads = reads if reads is not None else Reads(engine, sticky_seconds=0)
        self._dialect = engine.dialect.name
        if self._dialect not in ("mysql", "mariadb", "sqlite"):
            raise ValueError(f"unsupported database dialect {self._dialect!r}")
        self.relativity = relativity
        self.mmr_lambda = mmr_lambda
        self.postings_budget = postings_budget
        # Passages of the stored chat turns fill the top k where memories cannot answer.
        self.search_history = search_history
        self._recent = RecentSearches(fresh_seconds)
        # Hot users' memories ranked in this process (lexical searches only), and their loads.
        self._warm = WarmUsers(warm_memories, hot_after=warm_after)
        self._warming: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.embedder = embedder
        self.query_timeout = query_timeout
        self.embedding_retry_seconds = embedding_retry_seconds
        self.vector_weight = vector_weight
        self.fusion: Literal["rrf", "weighted"] = fusion
        self.rrf_k = rrf_k
        self._embeddings_retry_at = 0.0  # monotonic time before which queries are not embedded
        # Query embeddings a search stopped waiting for, left to finish: how they end tells
        # a slow endpoint (a late answer) from one that is down (an error, or none at all).
        self._late: set[asyncio.Task[npt.NDArray[np.float32]]] = set()

    # --- writes --------------------------------------------------------------------------

    async def add(self, memories: Sequence[NewMemory], *, cause: Cause = API) -> list[MemoryItem]:
        """Store memories; content already live in the same cube (after normalisation) is not
        stored again, the stored item is answered instead. Answers one item per input. The
        memories this call stored are recorded as ``added`` (``cause``) with them."""
        if not memories:
            return []
        keys: list[ContentKey] = []
        rows: dict[ContentKey, dict[str, Any]] = {}
        replaced: dict[str, tuple[str, ...]] = {}  # new row id -> the memories it supersedes
        terms: dict[str, DocumentTerms] = {}  # by new row id
        now = memory_rows.now()
        for n, memory in enumerate(memories):
            # One microsecond apart: the batch keeps its order in time (newest-first lists,
            # ties in search), deterministically.
            row = memory_rows.new_row(memory, now + timedelta(microseconds=n))
            key = memory_rows.content_key(row)
            keys.append(key)
            if key not in rows:
                rows[key] = row
                replaced[row["id"]] = memory.supersedes
                terms[row["id"]] = document_terms(memory.content)
                row["term_count"] = terms[row["id"]].length
                row["trace_id"] = cause.trace_id
        stored: dict[ContentKey, MemoryItem] = {}
        async with self._engine.begin() as conn:
            # Key order: concurrent batches take the unique-key locks in the same order.
            pending = [rows[k] for k in sorted(rows)]
            for _attempt in range(2):
                await conn.execute(memory_rows.insert_ignore(self._dialect), pending)
                found, dead = await memory_rows.read_back(conn, pending)
                stored.update(found)
                if not dead:
                    break
                # Rows deleted by code that did not leave a tombstone still hold the key.
                for tenant, dead_id in dead:
                    await memory_rows.free_key(conn, tenant, dead_id)
                pending = [rows[k] for k in sorted(rows) if k not in stored]
            # The postings of the rows this call inserted (a key held already has its own),
            # committed with them.
            posted = [
                posting
                for item in stored.values()
                if item.id in terms
                for posting in postings.rows_of(
                    item.tenant_id, item.user_id, item.id, terms[item.id], cube_id=item.cube_id
                )
            ]
            await postings.write(conn, posted)
            inserted = [item for item in stored.values() if item.id in terms]
            await self.changes.write(
                conn, [added(i, self.name, cause, replaced[i.id], now) for i in inserted]
            )
            await stamps.bump(conn, ((i.tenant_id, i.user_id) for i in inserted))
        for tenant_id, user_id in {(k[0], k[1]) for k in keys}:
            self._reads.wrote(tenant_id, user_id)
            self._recent.drop(tenant_id, user_id)
        missing = [k for k in keys if k not in stored]
        if missing:
            raise RuntimeError(f"memories not stored: {missing[:3]}")
        return [stored[k] for k in keys]

    async def delete(
        self, tenant_id: str, ids: Sequence[str], *, erase: bool = False, cause: Cause = API
    ) -> list[str]:
        """Delete memories of ``tenant_id`` by id; answers the ids that were live, recorded as
        changed by ``cause`` (superseded, deleted, expired). With ``erase`` (a user deleting a
        memory, who expects its words gone rather than kept until the user is forgotten) the
        tombstone rows lose their text and vectors too; a memory superseded by a newer one
        keeps its text, the record of what was once known."""
        deleted: list[str] = []
        users: set[tuple[str, str]] = set()
        now = memory_rows.now()
        async with self._engine.begin() as conn:
            for chunk in in_lists(sorted(set(ids))):
                expired = await memory_rows.expire(conn, memory_rows.by_ids(tenant_id, chunk))
                users.update((i.tenant_id, i.user_id) for i in expired)
                gone = [item.id for item in expired]
                # Out of the packed vectors first: ``erase`` drops the rows saying where.
                await vector_blocks.unpack(conn, tenant_id, gone)
                if erase:
                    await memory_rows.erase(conn, tenant_id, gone)
                    await self.changes.erase(conn, tenant_id, gone)
                await self.changes.write(conn, [removed(i, self.name, cause, now) for i in expired])
                deleted += gone
            await postings.remove(conn, tenant_id, deleted)
            await stamps.bump(conn, users)
        if deleted:
            self._reads.wrote(tenant_id)
            self._recent.drop(tenant_id)
        return deleted

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user: soft-delete every live memory of every cube, each recorded as
        ``forgotten``; answers their ids."""
        async with self._engine.begin() as conn:
            expired = await memory_rows.expire(conn, memory_rows.of_user(tenant_id, user_id))
            deleted = [item.id for item in expired]
            await postings.remove(conn, tenant_id, deleted)
            await vector_blocks.drop_user(conn, tenant_id, user_id)
            await self.changes.write(
                conn, [removed(i, self.name, FORGET, memory_rows.now()) for i in expired]
            )
            await stamps.bump(conn, [(tenant_id, user_id)])
        self._reads.wrote(tenant_id, user_id)
        self._recent.drop(tenant_id, user_id)
        return deleted

    # --- reads ---------------------------------------------------------------------------

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> list[MemoryItem]:
        """Every live memory of the readable cubes, newest first."""
        async with self._reads.engine(tenant_id, user_id).connect() as conn:
            return await memory_rows.list_live(conn, tenant_id, user_id, readable_cubes(agent_id))

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        *,
        top_k: int = 10,
        at: datetime | None = None,
    ) -> list[MemoryItem]:
        """The memories (``search_memories``) and, with ``search_history``, passages of the
        user's stored turns in what they leave of the top k (``turns.merge``), both read on
        one connection; a passage has ``origin`` ``"history"``. Given ``at``, when the
        question is asked, its relative dates are made absolute against it first."""
        if at is not None:
            query = dated_query(query, at)
        if top_k <= 0 or not query.strip():
            return []
        async with self._reads.engine(tenant_id, user_id).connect() as conn:
            warm = await self._search_warm(
                conn, tenant_id, user_id, agent_id, query, top_k, self.search_history
            )
            if warm is not None:
                return warm
            found = await self._search_memories(conn, tenant_id, user_id, agent_id, query, top_k)
            if not self.search_history or len(found) >= top_k:
                return found  # turns only fill what the memories leave: none left, none read
            cited = frozenset(e for item in found for e in item.source_event_ids)
            passages = await turns.search_turns(
                conn, tenant_id, user_id, agent_id, query, top_k - len(found), cited=cited
            )
        return turns.merge(found, passages, top_k)

    async def search_memories(
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
        hybrid with an embeddings client; never fails for the embeddings."""
        if top_k <= 0 or not query.strip():
            return []
        async with self._reads.engine(tenant_id, user_id).connect() as conn:
            warm = await self._search_warm(
                conn, tenant_id, user_id, agent_id, query, top_k, turns_too=False
            )
            if warm is not None:
                return warm
            return await self._search_memories(conn, tenant_id, user_id, agent_id, query, top_k)

    async def _search_memories(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        top_k: int,
    ) -> list[MemoryItem]:
        terms = query_terms(tokenize(query))
        embedding = self._embed_query(query)
        cubes = readable_cubes(agent_id)
        try:
            if embedding is None:
                key = (tenant_id, user_id, agent_id, search_terms(terms, TERM_CHARS), top_k)
                found = self._recent.get(key)
                if found is not None and await self._all_live(conn, tenant_id, found):
                    return found
                found = await self._search_lexical(conn, tenant_id, user_id, terms, cubes, top_k)
                self._recent.put(key, found)
                return found
            return await self._search_hybrid(
                conn, tenant_id, user_id, terms, cubes, top_k, embedding
            )
        finally:
            if embedding is not None and embedding[0] not in self._late:
                embedding[0].cancel()

    async def _search_warm(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        top_k: int,
        turns_too: bool,
    ) -> list[MemoryItem] | None:
        """The answer with the memories ranked here, when the user is warm and the user's
        stamp says the table still holds what this process does: the stamp read in the
        same round trip as the turn search (``turns_too``, when the memories leave room),
        so a warm search costs one round trip where a cold one costs two. None (the
        statements answer) otherwise, with a load of the user started once it is hot or
        found changed. Lexical searches only: a hybrid one reads the user's vectors anyway."""
        if self.embedder is not None:
            return None
        key = (tenant_id, user_id)
        entry = self._warm.get(key)
        if entry is None:
            warm.COLD.inc()
            if self._warm.noticed(key):
                self._warm_up(tenant_id, user_id)
            return None
        terms = query_terms(tokenize(query))
        cubes = readable_cubes(agent_id)
        found = entry.search(terms, cubes, top_k, self.relativity, self.mmr_lambda)
        cited = frozenset(e for item in found for e in item.source_event_ids)
        batch: list[tuple[Prepared, dict[str, Any]]] = [
            (stamps.READ, {"tenant_id": tenant_id, "user_id": user_id})
        ]
        turn = None
        if turns_too and len(found) < top_k:
            turn = turns.turn_search(
                tenant_id, user_id, agent_id, query, top_k - len(found), cited=cited
            )
            if turn is not None:
                batch.append((turn.statement, turn.params))
        rows = await prepared.batch(conn, batch)
        if stamps.of(rows[0]) != entry.stamp:
            warm.STALE.inc()
            self._warm.drop(tenant_id, user_id)
            if self._warm.may_reload():
                self._warm_up(tenant_id, user_id)
            return None
        warm.HIT.inc()
        self._warm.hit(entry)
        if turn is None:
            return found
        passages = turns.passages_of(
            rows[1], tenant_id, user_id, turn.words, top_k - len(found), cited=cited
        )
        return turns.merge(found, passages, top_k)

    def _warm_up(self, tenant_id: str, user_id: str) -> None:
        """Load the user into the warm layer off the request's path, ``MAX_WARMING`` loads
        at once at most (a user beyond is left for a later search)."""
        key = (tenant_id, user_id)
        if key in self._warming or len(self._warming) >= MAX_WARMING:
            return
        task = asyncio.create_task(self._load_warm(tenant_id, user_id))
        self._warming[key] = task
        task.add_done_callback(lambda _: self._warming.pop(key, None))

    async def _load_warm(self, tenant_id: str, user_id: str) -> None:
        try:
            async with self._reads.engine(tenant_id, user_id).connect() as conn:
                # The stamp first: the rows read after it are never older than it says, so an
                # entry is at worst newer than its stamp (then loaded again), never staler.
                stamp = await stamps.read(conn, tenant_id, user_id)
                rows = await memory_rows.searchable(
                    conn, tenant_id, user_id, limit=self._warm.capacity
                )
            if rows is None:
                return  # more than the layer holds: the user stays with the statement
            entry = await warm.load(stamp, tenant_id, user_id, rows)
            if entry.postings <= self.postings_budget:  # the statement's budget never bites
                self._warm.put((tenant_id, user_id), entry)
                # Out of the collector's way: each full collection would walk every warm
                # entry's objects again (tens of milliseconds with the layer full, the loop
                # stalled meanwhile). Frozen objects are still freed by their reference
                # counts when an entry goes; the young generations are collected first so
                # that no garbage is frozen with them.
                gc.collect(1)
                gc.freeze()
        except Exception as exc:  # the statement answers meanwhile
            log.warning("warm load of a user failed: %r", exc)

    @staticmethod
    async def _all_live(conn: AsyncConnection, tenant_id: str, found: Sequence[MemoryItem]) -> bool:
        """Whether every memory of a kept answer is still live: one deleted or forgotten
        through any process since is never served (point lookups on the primary key)."""
        if not found:
            return True
        live = await memory_rows.live_ids(conn, tenant_id, [item.id for item in found])
        return len(live) == len({item.id for item in found})

    async def _postings(
        self, conn: AsyncConnection, tenant_id: str, user_id: str, terms: Sequence[str]
    ) -> postings.Postings:
        """The stored postings of the query's terms (nothing to read without terms)."""
        if not terms:
            return postings.Postings()
        return await postings.read(
            conn, tenant_id, user_id, terms, phrases(terms), budget=self.postings_budget
        )

    async def _search_lexical(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        user_id: str,
        terms: Sequence[str],
        cubes: Sequence[str],
        top_k: int,
    ) -> list[MemoryItem]:
        """BM25 over the stored postings of the query's terms, scored in the database in one
        statement that answers only each cube's pool of live memories: no per-user warm-up,
        and the work here bounded by what is returned (docs/design/builtin-store.md)."""
        if not terms:
            return []
        found = await postings.ranked(
            conn,
            tenant_id,
            user_id,
            terms,
            cubes,
            pool=ranking.pool_size(top_k),
            floor=self.relativity * self.relativity,
            budget=self.postings_budget,
        )
        pools: dict[str, list[tuple[float, str]]] = {cube: [] for cube in cubes}
        for hit in found:
            pools[hit.item.cube_id].append((hit.relevance, hit.item.id))
        items = {hit.item.id: hit.item for hit in found}

        def token_set(doc_id: str) -> frozenset[str]:
            return frozenset(tokenize(items[doc_id].content))

        return pick_lexical(pools, items, token_set, top_k, self.mmr_lambda)

    async def _search_hybrid(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        user_id: str,
        terms: Sequence[str],
        cubes: Sequence[str],
        top_k: int,
        embedding: tuple[asyncio.Task[npt.NDArray[np.float32]], float],
    ) -> list[MemoryItem]:
        """The stored postings and the user's packed vectors, read while the query is
        embedded, ranked and fused; then the candidates' rows (only live ones are answered,
        however a memory was deleted); the postings and the rows on ``conn``, the vectors on
        a connection of their own."""
        assert self.embedder is not None
        model = self.embedder.model
        lexical = asyncio.ensure_future(self._postings(conn, tenant_id, user_id, terms))
        packed = asyncio.ensure_future(self._packed(tenant_id, user_id, model))
        try:
            query_vector = await self._query_vector(embedding)
            found, rows = await asyncio.gather(lexical, packed)
        finally:
            for task in (lexical, packed):
                task.cancel()
        if query_vector is None:
            return await self._search_lexical(conn, tenant_id, user_id, terms, cubes, top_k)
        dims = int(query_vector.shape[0])

        def rank() -> ranking.HybridCandidates:
            matrix = vector_blocks.matrix_of(rows, dims)
            return hybrid_candidates(
                _relevance(terms, found) if found.count or found.unread else {},
                found.cubes.__getitem__,
                matrix.ids,
                matrix.cubes,
                matrix.cosines(query_vector),
                cubes,
                top_k,
            )

        work = found.count + sum(row.memories for row in rows)
        candidates = await asyncio.to_thread(rank) if work > INLINE_WORK else rank()
        ids = candidates.ids()
        if not ids:
            return []
        items = {item.id: item for item in await memory_rows.live_items(conn, tenant_id, ids)}

        def token_set(doc_id: str) -> frozenset[str]:
            return frozenset(tokenize(items[doc_id].content))

        return pick_hybrid(candidates, items, token_set, cubes, top_k, self)

    async def _packed(self, tenant_id: str, user_id: str, model: str) -> list[vector_blocks.Block]:
        async with self._reads.engine(tenant_id, user_id).connect() as conn:
            return await vector_blocks.load(conn, tenant_id, user_id, model)

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
        """The query vector, or None (the search answers lexically) when it is not there by
        the deadline. Only a failure leaves the endpoint alone for a while: an embedding that
        is merely late runs on, and the endpoint is left alone once it fails or once more
        late ones are outstanding than the client has connections."""
        task, deadline = embedding
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.shield(task)
        except TimeoutError:
            self._late.add(task)
            task.add_done_callback(self._late_done)
            if len(self._late) > EmbeddingClient.MAX_CONNECTIONS:
                self._leave_endpoint_alone()
            self._fell_back("no answer in time")
            return None
        except Exception as exc:  # whatever went wrong, the search answers lexically
            self._leave_endpoint_alone()
            self._fell_back(repr(exc))
            return None

    def _late_done(self, task: asyncio.Task[npt.NDArray[np.float32]]) -> None:
        self._late.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._leave_endpoint_alone()

    def _leave_endpoint_alone(self) -> None:
        self._embeddings_retry_at = time.monotonic() + self.embedding_retry_seconds

    def _fell_back(self, detail: str) -> None:
        log.warning("query embedding failed (%s); searching lexically", detail)
        PROVIDER_FAILURES.labels(self.name, "embed_query").inc()
        degraded.note("embeddings")

    def clear_cache(self) -> None:
        self._recent.clear()
        self._warm.clear()

    async def aclose(self) -> None:
        """Stop the late query embeddings and close the embeddings client's connections."""
        for task in [*self._late, *self._warming.values()]:
            task.cancel()
        if self.embedder is not None:
            await self.embedder.aclose()


def _relevance(terms: Sequence[str], found: postings.Postings) -> dict[str, float]:
    """BM25 relevance of the posted memories (``retrieval.relevance``)."""
    return relevance(
        terms,
        found.n_docs,
        found.words,
        found.pairs,
        length_norms(found.lengths),
        unread=found.unread,
    )
