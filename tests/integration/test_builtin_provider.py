"""The built-in long-term store on both databases it supports: SQLite and the real MariaDB."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.changes.model import Cause
from memstream.identity import content_hash
from memstream.memory import USER_PROFILE, NewMemory, agent_cube
from memstream.providers.base import LongTermProvider
from memstream.providers.builtin import BuiltinProvider
from memstream.providers.builtin.index_cache import UserIndexCache
from memstream.store.memory_history import history
from memstream.store.postings import TermBackfill
from memstream.store.schema import long_term_memory, memory_change, memory_link
from memstream.text.terms import tokenize
from tests.support.databases import db

__all__ = ["db"]  # the fixture: SQLite and MariaDB

pytestmark = pytest.mark.integration


@pytest.fixture
def provider(db: AsyncEngine) -> BuiltinProvider:
    return BuiltinProvider(db)


def memory(
    tenant: str,
    content: str,
    *,
    user: str = "u1",
    cube: str = USER_PROFILE,
    agent: str | None = None,
    kind: str = "text_mem",
    events: tuple[str, ...] = ("e1",),
) -> NewMemory:
    return NewMemory(
        tenant_id=tenant,
        user_id=user,
        agent_id=agent,
        cube_id=cube,
        memory_type=kind,  # type: ignore[arg-type]
        content=content,
        importance=7,
        source_event_ids=events,
    )


FACTS = [
    "The user is vegetarian and avoids fish.",
    "The user lives in Berlin with a cat named Miso.",
    "The user prefers window seats on long flights.",
    "The user is learning to play the cello on weekends.",
    "The user works as a nurse on night shifts.",
]


def test_implements_the_interface(provider: BuiltinProvider) -> None:
    checked: LongTermProvider = provider
    assert checked.name == "MYSQL"


async def test_add_is_idempotent_by_content_per_cube(
    provider: BuiltinProvider, tenant: str
) -> None:
    first = await provider.add([memory(tenant, "Likes green tea.", events=("e1", "e2"))])
    assert len(first) == 1 and len(first[0].id) == 32
    item = first[0]
    assert item.source_event_ids == ("e1", "e2")
    assert item.importance == 7 and item.memory_type == "text_mem"
    assert item.created_at.tzinfo is UTC

    # Same content after normalisation (case, spacing): the stored item comes back.
    again = await provider.add([memory(tenant, "  likes   GREEN tea. ", events=("e9",))])
    assert [m.id for m in again] == [item.id]
    assert again[0].content == "Likes green tea." and again[0].source_event_ids == ("e1", "e2")

    # Same content in another cube or for another user is another memory; duplicates inside
    # one batch are stored once and answered for each input.
    batch = await provider.add(
        [
            memory(tenant, "Likes green tea.", cube=agent_cube("a1"), agent="a1"),
            memory(tenant, "Likes green tea.", user="u2"),
            memory(tenant, "Likes green tea.", user="u2"),
        ]
    )
    assert len({m.id for m in batch}) == 2 and batch[1].id == batch[2].id
    assert item.id not in {m.id for m in batch}
    live = await provider.list_live(tenant, "u1", "a1")
    assert sorted(m.cube_id for m in live) == ["agent_a1", USER_PROFILE]


async def test_a_search_answers_each_memory_as_it_is_stored(
    provider: BuiltinProvider, tenant: str
) -> None:
    # The search reads its rows packed in one JSON column: every field, quotes, escapes,
    # other scripts, microseconds and no source event included, comes back as a listing has it.
    said = datetime(2026, 3, 1, 18, 30, 5, 123456, tzinfo=UTC)
    written = [
        replace(
            memory(tenant, 'The user\'s cello "Miso" \\ lives in Zürich, 東京 too.\nReally.'),
            kind="episode",
            occurred_at=said,
            importance=9,
        ),
        memory(
            tenant, "The user plays the cello on Sundays.", cube="agent_a1", agent="a1", events=()
        ),
    ]
    stored = await provider.add(written)
    listed = {m.id: m for m in await provider.list_live(tenant, "u1", "a1")}
    found = await BuiltinProvider(provider._engine).search(tenant, "u1", "a1", "cello")
    assert {m.id for m in found} == {m.id for m in stored}
    for hit in found:
        assert replace(hit, score=1.0) == listed[hit.id]


async def test_kind_and_date_are_stored_and_returned(
    provider: BuiltinProvider, tenant: str
) -> None:
    said = datetime(2026, 3, 1, 18, 30, tzinfo=timezone(timedelta(hours=2)))
    episode = replace(
        memory(tenant, "On 1 March 2026 the user said they ran a half marathon."),
        kind="episode",
        occurred_at=said,
    )
    fact = memory(tenant, "The user runs half marathons.")
    stored = await provider.add([episode, fact])
    assert [(m.kind, m.occurred_at) for m in stored] == [
        ("episode", datetime(2026, 3, 1, 16, 30, tzinfo=UTC)),
        ("fact", None),
    ]
    # The same from a cold read, a search and a listing.
    fresh = BuiltinProvider(provider._engine)
    hits = {h.id: h for h in await fresh.search(tenant, "u1", None, "half marathon")}
    assert hits[stored[0].id].kind == "episode" and hits[stored[1].id].kind == "fact"
    assert hits[stored[0].id].occurred_at == said
    listed = {m.id: m for m in await fresh.list_live(tenant, "u1", None)}
    assert listed[stored[0].id].occurred_at == said and listed[stored[1].id].occurred_at is None
    with pytest.raises(ValueError, match="kind"):
        await provider.add([replace(fact, content="Other.", kind="rumour")])  # type: ignore[arg-type]


async def test_rejects_bad_input(provider: BuiltinProvider, tenant: str) -> None:
    with pytest.raises(ValueError):
        await provider.add([memory(tenant, "x", kind="episodic")])
    with pytest.raises(ValueError):
        await provider.add([memory(tenant, "   ")])
    with pytest.raises(ValueError):
        await provider.add([memory(tenant, "x", cube="somewhere")])
    assert await provider.add([]) == []


async def test_search_ranks_scores_and_filters(provider: BuiltinProvider, tenant: str) -> None:
    await provider.add([memory(tenant, fact) for fact in FACTS])
    hits = await provider.search(tenant, "u1", None, "what is my cat called?")
    assert hits and hits[0].content == FACTS[1]
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score >= provider.relativity for h in hits)
    # Nothing relevant: nothing returned (the relativity threshold), not the whole store.
    assert await provider.search(tenant, "u1", None, "quantum chromodynamics lecture") == []
    assert await provider.search(tenant, "u1", None, "   ") == []
    assert await provider.search(tenant, "u1", None, "cat", top_k=0) == []
    # A lower threshold finds weaker matches too.
    loose = BuiltinProvider(provider._engine, relativity=0.0)
    assert len(await loose.search(tenant, "u1", None, "night flights")) >= 2


async def test_search_returns_top_k_per_readable_cube(
    provider: BuiltinProvider, tenant: str
) -> None:
    rows = [memory(tenant, f"Project {n} uses the Rust compiler.") for n in range(6)]
    rows += [
        memory(tenant, f"Agent note {n}: the Rust compiler is slow.", cube="agent_a1", agent="a1")
        for n in range(6)
    ]
    rows += [memory(tenant, "Rust compiler flags for agent two.", cube="agent_a2", agent="a2")]
    await provider.add(rows)
    hits = await provider.search(tenant, "u1", "a1", "rust compiler", top_k=3)
    cubes = [h.cube_id for h in hits]
    assert cubes.count(USER_PROFILE) == 3 and cubes.count("agent_a1") == 3
    assert "agent_a2" not in cubes  # another agent's cube is not readable
    only_profile = await provider.search(tenant, "u1", None, "rust compiler", top_k=3)
    assert {h.cube_id for h in only_profile} == {USER_PROFILE}


async def test_mmr_drops_near_duplicates(provider: BuiltinProvider, tenant: str) -> None:
    await provider.add(
        [
            memory(tenant, "The user's favourite band is Radiohead."),
            memory(tenant, "The user's favourite band is Radiohead!!"),  # not the same text
            memory(tenant, "Favourite band of the user: Radiohead."),
            memory(tenant, "The user saw Radiohead live in 2016."),
        ]
    )
    hits = await provider.search(tenant, "u1", None, "favourite band radiohead")
    contents = [h.content for h in hits]
    # The three phrasings share every term: one of them is kept, plus the distinct memory.
    assert sum("favourite band" in c.lower() for c in contents) == 1
    assert "The user saw Radiohead live in 2016." in contents


async def test_list_and_delete(provider: BuiltinProvider, tenant: str) -> None:
    stored = await provider.add([memory(tenant, fact) for fact in FACTS[:3]])
    await provider.add([memory(tenant, "Agent-only fact.", cube="agent_a1", agent="a1")])
    live = await provider.list_live(tenant, "u1", None)
    assert {m.id for m in live} == {m.id for m in stored}
    assert [m.created_at for m in live] == sorted((m.created_at for m in live), reverse=True)

    assert await provider.delete(tenant, [stored[0].id, "no-such-id"]) == [stored[0].id]
    assert await provider.delete(tenant, [stored[0].id]) == []  # already deleted
    assert stored[0].id not in {m.id for m in await provider.list_live(tenant, "u1", None)}
    hits = await provider.search(tenant, "u1", None, "vegetarian fish")
    assert stored[0].id not in {h.id for h in hits}

    # Deleted content can be remembered again, as a new memory.
    again = await provider.add([memory(tenant, FACTS[0])])
    assert again[0].id != stored[0].id
    hits = await provider.search(tenant, "u1", None, "vegetarian fish")
    assert [h.id for h in hits] == [again[0].id]


async def test_delete_user_forgets_every_cube(provider: BuiltinProvider, tenant: str) -> None:
    mine = await provider.add(
        [
            memory(tenant, "Profile fact about tea."),
            memory(tenant, "Agent fact about tea.", cube="agent_a1", agent="a1"),
        ]
    )
    other = await provider.add([memory(tenant, "Someone else likes tea.", user="u2")])
    assert await provider.search(tenant, "u1", "a1", "tea")
    deleted = await provider.delete_user(tenant, "u1")
    assert sorted(deleted) == sorted(m.id for m in mine)
    assert await provider.list_live(tenant, "u1", "a1") == []
    assert await provider.search(tenant, "u1", "a1", "tea") == []
    assert [m.id for m in await provider.list_live(tenant, "u2", None)] == [other[0].id]
    assert await provider.delete_user(tenant, "u1") == []


async def test_tenants_are_isolated(provider: BuiltinProvider) -> None:
    tenant_a, tenant_b = f"ta-{uuid.uuid4().hex[:10]}", f"tb-{uuid.uuid4().hex[:10]}"
    a = await provider.add([memory(tenant_a, "Secret project codename is Bluebird.")])
    b = await provider.add([memory(tenant_b, "Secret project codename is Bluebird.")])
    assert a[0].id != b[0].id  # same user id, same content, different tenants
    hits_a = await provider.search(tenant_a, "u1", None, "secret project codename")
    assert [h.id for h in hits_a] == [a[0].id]
    assert [m.id for m in await provider.list_live(tenant_b, "u1", None)] == [b[0].id]
    # B cannot delete A's memory by id, nor forget A's user.
    assert await provider.delete(tenant_b, [a[0].id]) == []
    assert await provider.delete_user(tenant_b, "u1") == [b[0].id]
    assert [m.id for m in await provider.list_live(tenant_a, "u1", None)] == [a[0].id]


async def test_search_sees_writes_of_another_process(db: AsyncEngine, tenant: str) -> None:
    reader, writer = BuiltinProvider(db), BuiltinProvider(db)  # the API and the worker
    await writer.add([memory(tenant, fact) for fact in FACTS])
    assert (await reader.search(tenant, "u1", None, "cello"))[0].content == FACTS[3]
    assert (await reader.search(tenant, "u1", None, "Berlin cat"))[0].content == FACTS[1]

    added = await writer.add([memory(tenant, "The user bought a second cello bow.")])
    hits = await reader.search(tenant, "u1", None, "cello bow")
    assert hits[0].id == added[0].id

    await writer.delete(tenant, [added[0].id])
    hits = await reader.search(tenant, "u1", None, "cello bow")
    assert added[0].id not in {h.id for h in hits}

    await writer.delete_user(tenant, "u1")
    assert await reader.search(tenant, "u1", None, "cello") == []


async def test_cache_sees_deletes_by_other_code(db: AsyncEngine, tenant: str) -> None:
    """A soft delete that does not leave a tombstone is still seen, and the content can be
    added again afterwards."""
    provider = BuiltinProvider(db)
    stored = await provider.add([memory(tenant, FACTS[4])])
    assert await provider.search(tenant, "u1", None, "nurse night shifts")
    t = long_term_memory
    async with db.begin() as conn:
        await conn.execute(
            update(t)
            .where(t.c.tenant_id == tenant, t.c.id == stored[0].id)
            .values(deleted_at=stored[0].created_at.replace(tzinfo=None))
        )
    assert await provider.search(tenant, "u1", None, "nurse night shifts") == []
    again = await provider.add([memory(tenant, FACTS[4])])
    assert again[0].id != stored[0].id
    async with db.connect() as conn:
        hashes = (
            await conn.execute(select(t.c.content_hash).where(t.c.tenant_id == tenant))
        ).scalars()
        assert sorted(hashes) == sorted([stored[0].id, content_hash(FACTS[4])])


async def test_chinese_and_mixed_content(provider: BuiltinProvider, tenant: str) -> None:
    await provider.add(
        [
            memory(tenant, "用户喜欢吃辣的四川菜，不吃香菜。"),
            memory(tenant, "用户住在上海浦东，养了一只猫。"),
            memory(tenant, "用户每周三晚上去练习 yoga。"),
            memory(tenant, "The user drives a red Tesla."),
        ]
    )
    hits = await provider.search(tenant, "u1", None, "推荐一家四川菜馆")
    assert hits and hits[0].content.startswith("用户喜欢吃辣的四川菜")
    hits = await provider.search(tenant, "u1", None, "我住在哪里？上海")
    assert hits and "上海" in hits[0].content
    hits = await provider.search(tenant, "u1", None, "yoga 练习时间")
    assert hits and "yoga" in hits[0].content
    assert all(0.0 <= h.score <= 1.0 for h in hits)


def index_cache(db: AsyncEngine, users: int = 1024) -> UserIndexCache:
    """The per-user index cache that hybrid search ranks over."""
    return UserIndexCache(
        db, users=users, memories=250_000, revalidate_seconds=300.0, fresh_seconds=0.0
    )


async def test_cache_is_bounded(db: AsyncEngine, tenant: str) -> None:
    provider, cache = BuiltinProvider(db), index_cache(db, users=2)
    for user in ("u1", "u2", "u3"):
        await provider.add([memory(tenant, f"{user} likes chess.", user=user)])
        entry, _ = await cache.get(tenant, user, None)
        assert [i.content for i in entry.items.values()] == [f"{user} likes chess."]
    assert len(cache) == 2
    assert (tenant, "u1") not in cache


async def test_cache_follows_small_and_big_changes(db: AsyncEngine, tenant: str) -> None:
    writer, cache = BuiltinProvider(db), index_cache(db)
    stored = await writer.add([memory(tenant, fact) for fact in FACTS])
    entry, _ = await cache.get(tenant, "u1", None)
    # A small change is applied to the cached index in place.
    await writer.delete(tenant, [stored[3].id])
    violins = await writer.add([memory(tenant, "The user repairs violins for a living.")])
    again, _ = await cache.get(tenant, "u1", None)
    assert list(again.index.relevance(tokenize("violins cello"))) == [violins[0].id]
    assert again is entry and len(entry.items) == len(FACTS)
    # A big one is built anew (off the event loop); the result is the same either way.
    await writer.add(
        [memory(tenant, f"Reading list item {n}: a novel about cellos.") for n in range(150)]
    )
    rebuilt, _ = await cache.get(tenant, "u1", None)
    assert rebuilt is not entry and len(rebuilt.index.relevance(tokenize("novel cellos"))) == 150
    assert cache.memories == len(FACTS) + 150


async def test_rows_written_by_other_code_are_found(db: AsyncEngine, tenant: str) -> None:
    """Any id (even one with a comma) inserted straight into the table is searchable once
    the term backfill has run."""
    provider = BuiltinProvider(db)
    await provider.add([memory(tenant, FACTS[0])])
    assert await provider.search(tenant, "u1", None, "cello") == []
    odd_id = f"import,{uuid.uuid4().hex[:8]}"
    async with db.begin() as conn:
        await conn.execute(
            long_term_memory.insert().values(
                id=odd_id,
                tenant_id=tenant,
                user_id="u1",
                agent_id=None,
                cube_id=USER_PROFILE,
                memory_type="text_mem",
                content=FACTS[3],
                importance=5,
                source_event_ids=[],
                content_hash=content_hash(FACTS[3]),
                created_at=datetime(2026, 1, 1),
            )
        )
    assert await provider.search(tenant, "u1", None, "cello") == []
    assert await TermBackfill(db, tenant_id=tenant).run_until_done() >= 1
    assert [h.id for h in await provider.search(tenant, "u1", None, "cello")] == [odd_id]


async def test_concurrent_adds_store_one_memory(db: AsyncEngine, tenant: str) -> None:
    """The worker and an admin import adding the same memory at once: one row, one id."""
    first, second = BuiltinProvider(db), BuiltinProvider(db)
    batch = [memory(tenant, f"Concurrent fact number {n}.") for n in range(20)]
    a, b = await asyncio.gather(first.add(batch), second.add(list(reversed(batch))))
    assert [m.id for m in a] == [m.id for m in reversed(b)]
    assert len(await first.list_live(tenant, "u1", None)) == 20


async def test_every_change_is_recorded_with_it_and_links_the_superseding_memory(
    provider: BuiltinProvider, db: AsyncEngine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    (paris,) = await provider.add(
        [memory(tenant, "The user lives in Paris.")], cause=Cause.session("c1")
    )
    moved = replace(
        memory(tenant, "The user lives in Berlin.", events=("e2",)), supersedes=(paris.id,)
    )
    (berlin,) = await provider.add([moved], cause=Cause.session("c2"))
    await provider.add([moved], cause=Cause.session("c2"))  # applied again: nothing new
    assert await provider.delete(
        tenant, [paris.id], cause=Cause.conflict("c2", {paris.id: [berlin.id]})
    ) == [paris.id]

    c = memory_change.c
    query = select(c.memory_id, c.change, c.cause, c.conversation_id).where(c.tenant_id == tenant)
    async with db.connect() as conn:
        rows = (await conn.execute(query.order_by(c.seq))).all()
        links = (
            await conn.execute(select(memory_link).where(memory_link.c.tenant_id == tenant))
        ).all()
    assert [tuple(r) for r in rows] == [
        (paris.id, "added", "session", "c1"),
        (berlin.id, "added", "session", "c2"),
        (paris.id, "superseded", "conflict", "c2"),
    ]
    assert [(link.memory_id, link.supersedes_id) for link in links] == [(berlin.id, paris.id)]

    found = await history(db, tenant, paris.id)
    assert found is not None
    assert [(i.id, i.state, i.content) for i in found.items] == [
        (paris.id, "superseded", "The user lives in Paris."),
        (berlin.id, "live", "The user lives in Berlin."),
    ]
    assert found.items[0].superseded_by == [berlin.id] and found.items[1].supersedes == [paris.id]
    assert found.items[0].ended is not None and found.items[0].ended.cause == "conflict"
    assert await history(db, "another-tenant", paris.id) is None

    assert await provider.delete_user(tenant, "u1") == [berlin.id]
    async with db.connect() as conn:
        forgotten = (await conn.execute(query.where(c.change == "forgotten"))).all()
    assert [tuple(r) for r in forgotten] == [(berlin.id, "forgotten", "forget", None)]
