"""A search's work is bounded, on SQLite and the real MariaDB: a user whose many memories share
one vocabulary still gets the right answer from a bounded read of the postings, a lexical
search (scored in the database) reads only its pool's rows, and a hybrid search that ranks
many memories (with the local fake embeddings server) does so in a worker thread while the
loop serves other requests."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.providers.builtin import provider as provider_module
from memstream.providers.builtin.provider import INLINE_WORK
from memstream.providers.builtin.ranking import pool_size
from memstream.store import postings
from memstream.text.terms import phrases, tokenize
from tests.support.databases import db
from tests.support.embeddings import client, script, server

pytestmark = pytest.mark.integration

__all__ = ["db", "script", "server"]  # the fixtures: SQLite and MariaDB, fake embeddings

SHARED = (
    "cello violin garden berlin paris coffee hiking nurse doctor teacher "
    "novel poetry chess football sister brother wedding birthday train museum"
)


def shared_vocabulary(tenant: str, user: str, n: int) -> list[NewMemory]:
    """``n`` memories with the same twenty words, each with one word of its own."""
    return [
        NewMemory(
            tenant_id=tenant,
            user_id=user,
            agent_id=None,
            cube_id=USER_PROFILE,
            memory_type="text_mem",
            content=f"{SHARED} marker{i}",
            importance=5,
            source_event_ids=(f"e{i}",),
        )
        for i in range(n)
    ]


async def test_a_shared_vocabulary_is_read_within_the_budget_and_answers_right(
    db: AsyncEngine, tenant: str
) -> None:
    await BuiltinProvider(db).add(shared_vocabulary(tenant, "u1", 300))
    query = f"{SHARED} marker17"
    terms = tokenize(query)
    async with db.connect() as conn:
        found = await postings.read(conn, tenant, "u1", terms, phrases(terms), budget=1_000)
    # marker17 and its pair (one posting each) first, then the shared terms, 300 postings
    # each, as long as they fit; the others are left unread, their document frequency kept.
    assert 1_000 - 300 < found.count <= 1_000
    assert list(found.words["marker17"].values()) == [1]
    assert set(found.words) | set(found.unread) == set(terms)
    assert not set(found.words) & set(found.unread)
    assert found.unread and set(found.unread.values()) == {300}
    assert found.n_docs == 300

    bounded = await BuiltinProvider(db, postings_budget=1_000).search(tenant, "u1", None, query)
    whole = await BuiltinProvider(db).search(tenant, "u1", None, query)
    assert bounded[0].content.endswith(" marker17")
    assert whole[0].content.endswith(" marker17")
    # The unread terms are in every memory alike: only the rarest's hit rises above the rest.
    assert [m.id for m in bounded[:1]] == [m.id for m in whole[:1]]


def held_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> tuple[asyncio.Event, threading.Event]:
    """Wrap the provider's real ranking function ``name``: entered in a worker thread, it
    says so (the first event) and is held until the second is set; on the loop's own thread
    neither could happen (the wait gives up, the first event is never set)."""
    loop = asyncio.get_running_loop()
    ranking = asyncio.Event()
    served = threading.Event()
    real = getattr(provider_module, name)

    def observed(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            loop.call_soon_threadsafe(ranking.set)
            served.wait(timeout=10)
        return real(*args, **kwargs)

    monkeypatch.setattr(provider_module, name, observed)
    return ranking, served


async def served_while_held(
    provider: BuiltinProvider,
    tenant: str,
    query: str,
    ranking: asyncio.Event,
    served: threading.Event,
) -> list[MemoryItem]:
    """User "big"'s answer to ``query``, once user "small" has been answered while the big
    search was held in its worker thread."""
    big = asyncio.create_task(provider.search(tenant, "big", None, query))
    await asyncio.wait_for(ranking.wait(), timeout=60)
    small = await provider.search(tenant, "small", None, "marker1 cello")
    served.set()
    assert small[0].content.endswith(" marker1")
    return await big


async def test_a_lexical_search_reads_only_its_pool_whatever_its_terms_touch(
    db: AsyncEngine, tenant: str
) -> None:
    # Every memory holds every query term: the database scores them all and sends the pool.
    await BuiltinProvider(db).add(shared_vocabulary(tenant, "big", 400))
    query = f"{SHARED} marker5"
    terms = tokenize(query)
    async with db.connect() as conn:
        found = await postings.ranked(
            conn, tenant, "big", terms, [USER_PROFILE], pool=pool_size(10), floor=0.0
        )
    assert len(found) == pool_size(10) == 30
    assert found[0].item.content.endswith(" marker5")
    assert [r.relevance for r in found] == sorted((r.relevance for r in found), reverse=True)
    answer = await BuiltinProvider(db).search(tenant, "big", None, query)
    assert answer[0].id == found[0].item.id and len(answer) <= 10


async def test_a_hybrid_search_over_many_memories_ranks_off_the_loop(
    db: AsyncEngine, server: str, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = BuiltinProvider(db, embedder=client(server))
    await provider.add(shared_vocabulary(tenant, "small", 3))
    await provider.add(shared_vocabulary(tenant, "big", 3))
    done = await EmbeddingBackfill(
        db, client(server), tenant_id=tenant, max_pause_seconds=60.0
    ).run_until_done()
    assert done.error is None
    # More memories than ranked inline; those without a vector yet are found lexically.
    await provider.add(shared_vocabulary(tenant, "big", INLINE_WORK + 1)[3:])

    ranking, served = held_in_a_thread(monkeypatch, "hybrid_candidates")
    found = await served_while_held(provider, tenant, f"{SHARED} marker1500", ranking, served)
    assert found[0].content.endswith(" marker1500")
    await provider.aclose()


async def test_the_pools_rows_are_read_by_key_whatever_the_tenant_holds(
    engine: AsyncEngine, tenant: str
) -> None:
    # MariaDB's plan (SQLite plans the statement itself). Many rows of the tenant's beside a
    # few matching ones: a plan that starts from the tenant's rows reads them all each search.
    provider = BuiltinProvider(engine)
    for user in ("big", "other", "third"):
        await provider.add(shared_vocabulary(tenant, user, 400))
    terms = tokenize(f"{SHARED} marker5")
    params = {
        "tenant_id": tenant,
        "user_id": "big",
        "terms": sorted({*terms, *phrases(terms)}),
        "word_count": len(terms),
        "budget": postings.POSTINGS_BUDGET,
        "cubes": [USER_PROFILE],
        "floor": 0.0,
        "pool": pool_size(10),
    }
    shape = postings._prepared(1).shape(engine.dialect, params)
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        async with raw.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
            await cursor.execute("ANALYZE FORMAT=JSON " + shape.sql, shape.args(params))
            plan = json.loads((await cursor.fetchone())[0])
    outer = [step["table"] for step in plan["query_block"]["nested_loop"]]
    assert [t["table_name"] for t in outer] == ["<derived2>", "long_term_memory"]
    assert outer[1]["key"] == "PRIMARY" and outer[1]["r_loops"] == pool_size(10)
