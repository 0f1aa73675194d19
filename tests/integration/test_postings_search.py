"""Lexical search over the stored postings, on SQLite and the real MariaDB: a process that never
saw a user searches with a fixed number of statements and ranks as the in-memory index does,
a delete through any process is never served, rows imported by SQL are indexed by the term
backfill."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.identity import content_hash
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory, readable_cubes
from memstream.providers.builtin import BuiltinProvider
from memstream.providers.builtin.index_cache import UserIndexCache
from memstream.providers.builtin.ranking import lexical_pools, pick_lexical
from memstream.retrieval import MMR_LAMBDA, RELATIVITY
from memstream.store.postings import TermBackfill
from memstream.store.schema import long_term_memory, memory_term
from memstream.text.terms import tokenize
from tests.support.databases import db, statements
from tests.support.memories import QUERIES, WORDS, sharing_words

pytestmark = pytest.mark.integration

__all__ = ["db"]  # the fixture: SQLite and the real MariaDB


def memories(tenant: str, n: int, *, user: str = "u1", seed: int = 7) -> list[NewMemory]:
    return sharing_words(tenant, n, WORDS, user=user, seed=seed)


async def in_memory_search(
    db: AsyncEngine, tenant: str, user: str, agent: str | None, query: str, top_k: int = 10
) -> list[MemoryItem]:
    """The search as it was ranked before the postings: over a per-user in-memory index."""
    cache = UserIndexCache(db, users=1, memories=100_000, revalidate_seconds=300, fresh_seconds=0)
    entry, _ = await cache.get(tenant, user, None)
    items = entry.items
    scores = entry.index.relevance(tokenize(query))
    pools = lexical_pools(
        scores, lambda i: items[i].cube_id, readable_cubes(agent), top_k, RELATIVITY
    )
    return pick_lexical(pools, items, entry.index.token_set, top_k, MMR_LAMBDA)


async def test_a_process_that_never_saw_the_user_ranks_as_the_index_did(
    db: AsyncEngine, tenant: str
) -> None:
    await BuiltinProvider(db).add(memories(tenant, 400))
    for n, query in enumerate(QUERIES):
        cold = BuiltinProvider(db)  # a fresh API process, or another replica
        with statements(db) as seen:
            found = await cold.search(tenant, "u1", "a1" if n % 2 else None, query)
        # One statement: the postings of the query's terms scored, only the pool's rows read.
        assert len(seen) == 1, seen
        assert "memory_term" in seen[0]
        expected = await in_memory_search(db, tenant, "u1", "a1" if n % 2 else None, query)
        assert found, query
        assert [(m.id, m.score) for m in found] == [(m.id, m.score) for m in expected]


async def test_the_statements_do_not_grow_with_the_user(db: AsyncEngine, tenant: str) -> None:
    provider = BuiltinProvider(db)
    await provider.add(memories(tenant, 1200, user="big"))
    with statements(db) as seen:
        assert await BuiltinProvider(db).search(tenant, "big", None, "cello concert", top_k=30)
    assert len(seen) == 1


async def postings_of(db: AsyncEngine, tenant: str, memory_id: str) -> int:
    t = memory_term
    query = select(func.count()).where(t.c.tenant_id == tenant, t.c.memory_id == memory_id)
    async with db.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def test_a_delete_through_another_process_is_never_served(
    db: AsyncEngine, tenant: str
) -> None:
    reader, writer = BuiltinProvider(db), BuiltinProvider(db)  # two API replicas
    stored = await writer.add(memories(tenant, 60))
    query = "cello concert"
    before = await reader.search(tenant, "u1", None, query)
    assert before
    gone = before[0]
    assert await postings_of(db, tenant, gone.id) > 0
    assert await writer.delete(tenant, [gone.id]) == [gone.id]
    assert gone.id not in {m.id for m in await reader.search(tenant, "u1", None, query)}
    assert await postings_of(db, tenant, gone.id) == 0

    # A soft delete by other code leaves the postings; the search still never scores them.
    t = long_term_memory
    second = (await reader.search(tenant, "u1", None, query))[0]
    async with db.begin() as conn:
        await conn.execute(update(t).where(t.c.id == second.id).values(deleted_at=datetime.now()))
    assert await postings_of(db, tenant, second.id) > 0
    assert second.id not in {m.id for m in await reader.search(tenant, "u1", None, query)}

    # Forgetting removes the rows outright (the counts shrink): nothing is served after it.
    async with db.begin() as conn:
        await conn.execute(delete(t).where(t.c.tenant_id == tenant, t.c.user_id == "u1"))
    assert await reader.search(tenant, "u1", None, query) == []
    assert stored  # written, searched, forgotten


async def test_forgetting_a_user_removes_the_postings(db: AsyncEngine, tenant: str) -> None:
    reader, writer = BuiltinProvider(db), BuiltinProvider(db)
    stored = await writer.add(memories(tenant, 30))
    assert await reader.search(tenant, "u1", None, "cello concert coffee tea")
    assert sorted(await writer.delete_user(tenant, "u1")) == sorted(m.id for m in stored)
    assert await reader.search(tenant, "u1", None, "cello concert coffee tea") == []
    assert all([await postings_of(db, tenant, m.id) == 0 for m in stored])


async def test_rows_imported_by_sql_are_indexed_by_the_backfill(
    db: AsyncEngine, tenant: str
) -> None:
    provider = BuiltinProvider(db)
    content = "The user restores antique harpsichords in Leipzig."
    # Any id: one with the separators the postings are joined with is read row by row.
    ids = [f"import-{tenant}", f"odd\x1fid\x1e-{tenant}"]
    async with db.begin() as conn:
        for n, memory_id in enumerate(ids):
            text = content if n == 0 else "The user tunes harpsichords on Sundays."
            await conn.execute(
                long_term_memory.insert().values(
                    id=memory_id,
                    tenant_id=tenant,
                    user_id="u1",
                    agent_id=None,
                    cube_id=USER_PROFILE,
                    memory_type="text_mem",
                    content=text,
                    importance=5,
                    source_event_ids=[],
                    content_hash=content_hash(text),
                    created_at=datetime(2026, 1, 1),
                )
            )
    assert await provider.search(tenant, "u1", None, "harpsichord Leipzig") == []
    backfill = TermBackfill(db, tenant_id=tenant)
    assert await backfill.run_until_done() == 2
    found = await provider.search(tenant, "u1", None, "harpsichord Leipzig")
    assert [m.id for m in found] == ids and found[0].score == 1.0
    assert [m.id for m in await provider.search(tenant, "u1", None, "tunes Sundays")] == ids[1:]
    assert await backfill.tick() == 0  # indexed once


async def test_a_kept_answer_never_serves_what_another_replica_deleted(
    db: AsyncEngine, tenant: str
) -> None:
    # Answers kept for a minute: a delete or a forget through another replica still shows
    # at once, and the answer is searched again.
    reader, writer = BuiltinProvider(db, fresh_seconds=60), BuiltinProvider(db)
    await writer.add(memories(tenant, 60))
    query = "cello concert"
    before = await reader.search(tenant, "u1", None, query)
    assert before and await reader.search(tenant, "u1", None, query) == before  # kept
    assert await writer.delete(tenant, [before[0].id]) == [before[0].id]
    after = await reader.search(tenant, "u1", None, query)
    assert after and before[0].id not in {m.id for m in after}
    await writer.delete_user(tenant, "u1")
    assert await reader.search(tenant, "u1", None, query) == []
