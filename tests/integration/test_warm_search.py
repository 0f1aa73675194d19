"""The built-in store's warm layer, on SQLite and the real MariaDB: a hot user's searches are
ranked in the process after one read of the user's stamp, answering what the statement
answers; a change through any process (another API replica, the worker, a forget, the term
backfill) is seen by the next search, never an answer from before it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.memory import MemoryItem, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.store import erasure
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.postings import TermBackfill
from memstream.store.schema import long_term_memory, memory_stamp
from memstream.store.turns import HistoryIndex
from memstream.text.tokens import count_tokens
from tests.support.databases import db, statements
from tests.support.memories import QUERIES, WORDS, sharing_words

pytestmark = pytest.mark.integration

__all__ = ["db"]  # the fixture: SQLite and the real MariaDB


def memories(tenant: str, n: int, *, user: str = "u1", seed: int = 7) -> list[NewMemory]:
    return sharing_words(tenant, n, WORDS, user=user, seed=seed, tag=f"{seed}-")


def warm_provider(db: AsyncEngine, **options: int) -> BuiltinProvider:
    return BuiltinProvider(db, warm_memories=options.get("memories", 10_000), warm_after=1)


async def warmed(provider: BuiltinProvider, tenant: str, user: str = "u1") -> None:
    """Search once (the user is hot at once here) and wait for the load to land."""
    await provider.search(tenant, user, None, "cello")
    await asyncio.gather(*provider._warming.values())
    assert provider._warm.get((tenant, user)) is not None


def answer(found: list[MemoryItem]) -> list[tuple[str, float, str]]:
    return [(m.id, m.score, m.origin) for m in found]


async def test_a_warm_search_answers_as_the_statement_with_one_stamp_read(
    db: AsyncEngine, tenant: str
) -> None:
    await BuiltinProvider(db).add(memories(tenant, 300))
    provider = warm_provider(db)
    await warmed(provider, tenant)
    for n, query in enumerate(QUERIES):
        agent = "a1" if n % 2 else None
        with statements(db) as seen:
            found = await provider.search_memories(tenant, "u1", agent, query)
        assert len(seen) == 1 and "memory_stamp" in seen[0], seen
        cold = await BuiltinProvider(db).search_memories(tenant, "u1", agent, query)
        assert found, query
        assert answer(found) == answer(cold), query


async def test_another_process_s_writes_are_seen_by_the_next_search(
    db: AsyncEngine, tenant: str
) -> None:
    await BuiltinProvider(db).add(memories(tenant, 60))
    provider = warm_provider(db)
    await warmed(provider, tenant)
    other = BuiltinProvider(db)  # another API replica, or the worker
    before = await provider.search_memories(tenant, "u1", "a1", "cello concert", top_k=5)
    assert before

    await other.delete(tenant, [before[0].id])
    after = await provider.search_memories(tenant, "u1", "a1", "cello concert", top_k=5)
    assert before[0].id not in {m.id for m in after}

    [new] = await other.add([replace(memories(tenant, 1, seed=99)[0], content="cello concert")])
    found = await provider.search_memories(tenant, "u1", "a1", "cello concert", top_k=5)
    assert new.id in {m.id for m in found}
    # Reloaded off the path, then warm again with what the table holds.
    await asyncio.gather(*provider._warming.values())
    again = await provider.search_memories(tenant, "u1", "a1", "cello concert", top_k=5)
    assert answer(again) == answer(found)


async def test_a_forgotten_user_is_never_answered_from_the_warm_layer(
    db: AsyncEngine, tenant: str
) -> None:
    await BuiltinProvider(db).add(memories(tenant, 40))
    provider = warm_provider(db)
    await warmed(provider, tenant)
    assert await provider.search_memories(tenant, "u1", None, "cello concert violin")
    await BuiltinProvider(db).delete_user(tenant, "u1")
    await erasure.erase_memory_rows(db, tenant, "u1")
    assert await provider.search_memories(tenant, "u1", None, "cello concert violin") == []
    # The stamp outlives the user: memories stored again never carry the stamp of the old.
    async with db.connect() as conn:
        query = select(memory_stamp.c.stamp).where(memory_stamp.c.tenant_id == tenant)
        stamps = (await conn.execute(query)).scalars().all()
    assert stamps == [3]  # stored, forgotten, erased


async def test_rows_indexed_by_the_backfill_are_found_by_a_warm_user(
    db: AsyncEngine, tenant: str
) -> None:
    stored = await BuiltinProvider(db).add(memories(tenant, 30))
    async with db.begin() as conn:  # as if imported by SQL: no postings yet
        await conn.execute(
            update(long_term_memory)
            .where(long_term_memory.c.id == stored[0].id)
            .values(term_count=None, content="the oboe recital in vienna")
        )
    provider = warm_provider(db)
    await warmed(provider, tenant)
    assert await provider.search_memories(tenant, "u1", "a1", "oboe recital") == []
    await TermBackfill(db, tenant_id=tenant).run_until_done()
    found = await provider.search_memories(tenant, "u1", "a1", "oboe recital")
    assert [m.id for m in found] == [stored[0].id]


async def test_the_layer_keeps_to_its_bound(db: AsyncEngine, tenant: str) -> None:
    for user in ("u1", "u2", "u3"):
        await BuiltinProvider(db).add(memories(tenant, 40, user=user))
    provider = warm_provider(db, memories=100)
    for user in ("u1", "u2", "u3"):
        await warmed(provider, tenant, user)
    assert provider._warm.memories <= 100 and len(provider._warm) == 2
    assert provider._warm.get((tenant, "u1")) is None  # the least recently searched went
    # A user larger than the whole layer stays with the statement.
    await BuiltinProvider(db).add(memories(tenant, 150, user="big"))
    await provider.search(tenant, "big", None, "cello")
    await asyncio.gather(*provider._warming.values())
    assert provider._warm.get((tenant, "big")) is None


async def test_the_turns_are_searched_in_the_stamp_s_round_trip_as_a_cold_search_does(
    db: AsyncEngine, tenant: str
) -> None:
    at = datetime(2023, 5, 30, 12, 0)
    said = [
        ("user", "I play the cello in a quartet on Fridays."),
        ("assistant", "A quartet is a lovely way to keep the cello going; Fridays suit it."),
        ("user", "My sister moved to Berlin last spring."),
    ]
    await MessageStore(db).insert_many(
        [
            StoredMessage(
                tenant_id=tenant,
                conversation_id="c1",
                event_id=f"c1-{n}",
                user_id="u1",
                agent_id=None,
                role=role,
                message_type="chat",
                content=content,
                token_count=count_tokens(content),
                created_at=at + timedelta(seconds=n),
                source_conversation_id="c1",
            )
            for n, (role, content) in enumerate(said)
        ]
    )
    await HistoryIndex(db, tenant_id=tenant).run_until_done()
    await BuiltinProvider(db).add(memories(tenant, 30))
    provider = warm_provider(db)
    await warmed(provider, tenant)
    for query in ("cello quartet on Fridays", "where did my sister move, Berlin?"):
        with statements(db) as seen:
            found = await provider.search(tenant, "u1", None, query)
        # The stamp and the turn search: one round trip on MariaDB (two statements seen).
        assert len(seen) == 2 and "memory_stamp" in seen[0], seen
        cold = await BuiltinProvider(db).search(tenant, "u1", None, query)
        assert "history" in {m.origin for m in found}, query
        assert answer(found) == answer(cold), query
