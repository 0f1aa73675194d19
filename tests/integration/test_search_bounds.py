"""A search's work is bounded, on SQLite and the real MariaDB: a user whose many memories share
one vocabulary still gets the right answer from a bounded read of the postings, and a search
that ranks many postings does so in a worker thread while the loop serves other requests."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import MySQLProvider, postings
from memstream.providers.builtin import provider as provider_module
from memstream.providers.builtin.provider import INLINE_WORK
from memstream.text.terms import phrases, tokenize
from tests.integration.test_mysql_provider import db

pytestmark = pytest.mark.integration

__all__ = ["db"]  # the fixture: SQLite and the real MariaDB

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
    await MySQLProvider(db).add(shared_vocabulary(tenant, "u1", 300))
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

    bounded = await MySQLProvider(db, postings_budget=1_000).search(tenant, "u1", None, query)
    whole = await MySQLProvider(db).search(tenant, "u1", None, query)
    assert bounded[0].content.endswith(" marker17")
    assert whole[0].content.endswith(" marker17")
    # The unread terms are in every memory alike: only the rarest's hit rises above the rest.
    assert [m.id for m in bounded[:1]] == [m.id for m in whole[:1]]


async def test_the_loop_serves_a_small_search_while_a_big_one_ranks(
    db: AsyncEngine, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = MySQLProvider(db)
    await writer.add(shared_vocabulary(tenant, "big", 200))
    await writer.add(shared_vocabulary(tenant, "small", 3))
    query = f"{SHARED} marker5"
    assert len(SHARED.split()) * 200 > INLINE_WORK  # the big search ranks off the loop

    loop = asyncio.get_running_loop()
    ranking = asyncio.Event()
    served = threading.Event()
    real = provider_module.lexical_pools

    def observed(*args: Any, **kwargs: Any) -> Any:
        # The real ranking, entered and then held until the small search has been answered:
        # on the loop's own thread that answer could never come (the wait gives up).
        if threading.current_thread() is not threading.main_thread():
            loop.call_soon_threadsafe(ranking.set)
            served.wait(timeout=10)
        return real(*args, **kwargs)

    monkeypatch.setattr(provider_module, "lexical_pools", observed)
    searcher = MySQLProvider(db)
    big = asyncio.create_task(searcher.search(tenant, "big", None, query))
    await asyncio.wait_for(ranking.wait(), timeout=30)
    small = await searcher.search(tenant, "small", None, "marker1 cello")
    served.set()
    assert small[0].content.endswith(" marker1")
    found = await big
    assert found[0].content.endswith(" marker5")
    assert not big.cancelled()
