"""Hybrid search in the built-in store: vectors filled in by the backfill, lexical and vector
ranks fused, and lexical answers (said as degraded) when the embeddings endpoint fails; on
MariaDB and SQLite, with the local fake embeddings server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import publish
from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.memory import USER_PROFILE, NewMemory, agent_cube
from memstream.providers import degraded
from memstream.providers.builtin import BuiltinProvider
from memstream.retrieval import RELATIVITY
from memstream.settings import Settings
from memstream.store import memory_rows, vector_blocks
from memstream.store.database import create_engine
from memstream.store.schema import long_term_memory, memory_embedding, memory_vector_block
from tests.fakes.embeddings import EmbeddingScript, Fault
from tests.support.api import client_for
from tests.support.databases import db
from tests.support.embeddings import (
    DIMENSION,
    FACTS,
    MODEL,
    QUESTION,
    VEGETARIAN,
    at_cosine,
    client,
    script,
    server,
)
from tests.support.kafka import message, session_end
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

__all__ = ["db", "script", "server"]  # the fixtures: SQLite and MariaDB, fake embeddings

pytestmark = pytest.mark.integration


def memory(tenant: str, content: str, *, user: str = "u1", cube: str = USER_PROFILE) -> NewMemory:
    agent = cube.removeprefix("agent_") if cube != USER_PROFILE else None
    return NewMemory(tenant, user, agent, cube, "text_mem", content, 6, ("e1",))


def backfill(
    db: AsyncEngine,
    url: str,
    tenant: str,
    *,
    per_tick: int | None = None,
    pause: float = 60.0,
    **options: float,
) -> EmbeddingBackfill:
    """The backfill over this test's tenant only (the shared database holds other tests')."""
    return EmbeddingBackfill(
        db, client(url, **options), per_tick=per_tick, tenant_id=tenant, max_pause_seconds=pause
    )


def hybrid(db: AsyncEngine, url: str, **options: float) -> BuiltinProvider:
    return BuiltinProvider(db, embedder=client(url), **options)  # type: ignore[arg-type]


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


async def packed(db: AsyncEngine, tenant: str, user: str = "u1") -> int:
    async with db.connect() as conn:
        return await vector_blocks.count(conn, tenant, user, MODEL)


async def vector_count(db: AsyncEngine, tenant: str) -> int:
    query = select(func.count()).where(memory_embedding.c.tenant_id == tenant)
    async with db.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def test_a_question_finds_a_memory_sharing_no_word_with_it(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    provider = hybrid(db, server)
    await provider.add([memory(tenant, fact) for fact in FACTS])
    lexical = BuiltinProvider(db)
    assert await lexical.search(tenant, "u1", None, QUESTION) == []

    done = await backfill(db, server, tenant).run_until_done()
    assert done.stored >= len(FACTS) and done.error is None
    with degraded.collect() as fell_back:
        hits = await provider.search(tenant, "u1", None, QUESTION)
    assert fell_back == []
    assert [h.content for h in hits] == [VEGETARIAN]
    assert RELATIVITY <= hits[0].score <= 1.0
    # Words still count: a lexical match ranks as before, the meaning adds to it.
    hits = await provider.search(tenant, "u1", None, "Where does the user live? Berlin")
    assert hits[0].content == "The user lives in Berlin."
    await provider.aclose()


async def test_a_faint_best_match_enters_when_it_clearly_beats_the_rest(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    """MiniLM relates the question to the vegetarian memory at a cosine of only 0.128, while
    the user's other memories score about 0.03: the best hit enters by rank."""
    script.meanings[VEGETARIAN] = at_cosine(0.128, 0, 2)
    script.meanings["The user lives in Berlin."] = at_cosine(0.033, 0, 3)
    provider = hybrid(db, server)
    await provider.add([memory(tenant, fact) for fact in FACTS[:2]])
    await backfill(db, server, tenant).run_until_done()
    hits = await provider.search(tenant, "u1", None, QUESTION)
    assert [h.content for h in hits] == [VEGETARIAN]
    assert hits[0].score == pytest.approx(RELATIVITY)
    await provider.aclose()


async def test_memories_without_a_vector_are_found_lexically(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    provider = hybrid(db, server)
    await provider.add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    assert (await provider.search(tenant, "u1", None, QUESTION))[0].content == VEGETARIAN
    # Written after the backfill ran: no vector yet, found by its words all the same.
    late = await provider.add([memory(tenant, "The user adopted a greyhound named Pixel.")])
    hits = await provider.search(tenant, "u1", None, "greyhound Pixel")
    assert [h.id for h in hits] == [late[0].id]
    # Once it has a vector, the matrix follows without a full reload.
    assert (await backfill(db, server, tenant).run_until_done()).stored == 1
    hits = await provider.search(tenant, "u1", None, "greyhound Pixel")
    assert [h.id for h in hits] == [late[0].id]
    assert await packed(db, tenant) == len(FACTS) + 1


async def test_vectors_of_deleted_memories_are_never_returned(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    provider = hybrid(db, server)
    stored = await provider.add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    assert (await provider.search(tenant, "u1", None, QUESTION))[0].id == stored[0].id
    await BuiltinProvider(db).delete(tenant, [stored[0].id])  # another process deletes it
    assert await provider.search(tenant, "u1", None, QUESTION) == []
    assert await packed(db, tenant) == len(FACTS) - 1  # out of its block at once
    # Deleted by SQL: still in its block, never answered.
    t = long_term_memory
    async with db.begin() as conn:
        await conn.execute(
            update(t)
            .where(t.c.tenant_id == tenant, t.c.id == stored[1].id)
            .values(deleted_at=now())
        )
    assert stored[1].id not in {h.id for h in await provider.search(tenant, "u1", None, "Berlin")}
    await provider.delete_user(tenant, "u1")
    assert await provider.search(tenant, "u1", None, QUESTION) == []
    assert await packed(db, tenant) == 0


async def test_a_cold_process_finds_a_vector_only_hit(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    """Every search reads the user's packed vectors: a process that never saw the user
    finds a memory sharing no word with the question on its first search."""
    stored = await BuiltinProvider(db).add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    assert await BuiltinProvider(db).search(tenant, "u1", None, QUESTION) == []  # no shared word
    cold = hybrid(db, server)
    hits = await cold.search(tenant, "u1", None, QUESTION)
    assert [h.id for h in hits][:1] == [stored[0].id]
    await cold.aclose()


async def test_an_erased_memory_leaves_its_block(db: AsyncEngine, server: str, tenant: str) -> None:
    provider = hybrid(db, server)
    stored = await provider.add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    await provider.delete(tenant, [stored[0].id], erase=True)
    async with db.connect() as conn:
        found = vector_blocks.matrix_of(
            await vector_blocks.load(conn, tenant, "u1", MODEL), DIMENSION
        )
    assert len(found) == len(FACTS) - 1 and stored[0].id not in found.ids
    assert await provider.search(tenant, "u1", None, QUESTION) == []


async def test_rows_written_by_sql_get_vectors_and_are_found_by_meaning(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    """A memory imported by SQL (no postings, no vector) is embedded and packed by the
    backfill; a vector imported by SQL (not in a block) is packed by the same ticks."""
    t = long_term_memory
    row = memory_rows.new_row(memory(tenant, VEGETARIAN), now())
    async with db.begin() as conn:
        await conn.execute(t.insert().values(**row))
    provider = hybrid(db, server)
    assert await provider.search(tenant, "u1", None, QUESTION) == []
    result = await backfill(db, server, tenant).run_until_done()
    assert result.stored == 1 and result.packed == 1
    assert [h.id for h in await provider.search(tenant, "u1", None, QUESTION)] == [row["id"]]
    # Vectors stored before the blocks existed (or by SQL): packed by the next tick.
    e = memory_embedding
    async with db.begin() as conn:
        await conn.execute(update(e).where(e.c.tenant_id == tenant).values(block=None))
        await conn.execute(
            delete(memory_vector_block).where(memory_vector_block.c.tenant_id == tenant)
        )
    assert await provider.search(tenant, "u1", None, QUESTION) == []
    assert (await backfill(db, server, tenant).tick()).packed == 1
    assert [h.id for h in await provider.search(tenant, "u1", None, QUESTION)] == [row["id"]]
    await provider.aclose()


async def test_a_forget_through_another_replica_is_never_served(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    """A forget removes the rows outright, so the user's counts shrink: a replica whose
    cached index holds more than the table never serves what it holds."""
    replica = hybrid(db, server)
    stored = await BuiltinProvider(db).add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    assert (await replica.search(tenant, "u1", None, QUESTION))[0].id == stored[0].id
    t = long_term_memory
    async with db.begin() as conn:
        await conn.execute(delete(t).where(t.c.tenant_id == tenant, t.c.id == stored[0].id))
    hits = await replica.search(tenant, "u1", None, QUESTION)
    assert stored[0].id not in {h.id for h in hits}
    async with db.begin() as conn:
        await conn.execute(delete(t).where(t.c.tenant_id == tenant, t.c.user_id == "u1"))
    assert await replica.search(tenant, "u1", None, QUESTION) == []
    assert await replica.search(tenant, "u1", None, "Berlin") == []
    await replica.aclose()


async def test_the_agent_cube_and_other_users_stay_apart(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    provider = hybrid(db, server)
    await provider.add(
        [
            memory(tenant, VEGETARIAN, cube=agent_cube("a1")),
            memory(tenant, VEGETARIAN, user="u2"),
            memory(tenant, "The user lives in Berlin."),
        ]
    )
    await backfill(db, server, tenant).run_until_done()
    assert await provider.search(tenant, "u1", None, QUESTION) == []  # agent cube not readable
    hits = await provider.search(tenant, "u1", "a1", QUESTION)
    assert [(h.cube_id, h.user_id) for h in hits] == [(agent_cube("a1"), "u1")]


async def test_each_readable_cube_gets_its_share_of_vector_hits(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    """A small agent cube next to a large profile still gets its best hits, however low they
    rank among all of the user's vectors."""
    profile = [memory(tenant, f"Profile note {n} on gardening.") for n in range(300)]
    agent = [memory(tenant, f"Agent note {n}.", cube=agent_cube("a1")) for n in range(2)]
    for n, new in enumerate(profile):
        script.meanings[new.content] = at_cosine(0.5, 0, 10 + n)
    for n, new in enumerate(agent):
        script.meanings[new.content] = at_cosine(0.2, 0, 350 + n)
    await BuiltinProvider(db).add([*profile, *agent])
    await backfill(db, server, tenant).run_until_done()
    provider = BuiltinProvider(db, embedder=client(server), relativity=0.0)
    hits = await provider.search(tenant, "u1", "a1", QUESTION, top_k=3)
    cubes = [h.cube_id for h in hits]
    assert cubes.count(agent_cube("a1")) == 2 and cubes.count(USER_PROFILE) == 3


async def facts_embedded(
    db: AsyncEngine, server: str, tenant: str, query_timeout: float
) -> BuiltinProvider:
    """A hybrid provider over ``FACTS``, every one embedded."""
    provider = hybrid(db, server, query_timeout=query_timeout)
    await provider.add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    return provider


async def settled(provider: BuiltinProvider) -> bool:
    """Whether no query embedding the provider stopped waiting for is still running."""
    return not provider._late


async def test_an_embeddings_outage_answers_lexically_and_says_so(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    provider = await facts_embedded(db, server, tenant, 0.3)
    provider.embedder = client(f"http://127.0.0.1:{free_port()}/v1")
    with degraded.collect() as fell_back:
        hits = await provider.search(tenant, "u1", None, "cello weekends")
    # Lexical hits and the fallback said.
    assert fell_back == ["embeddings"]
    assert [h.content for h in hits] == ["The user plays the cello on weekends."]
    # Until the retry pause is over the endpoint is left alone: no wait, still said.
    provider.embedder = client(server)
    asked = len(script.requests)
    with degraded.collect() as fell_back:
        assert await provider.search(tenant, "u1", None, QUESTION) == []
    assert fell_back == ["embeddings"] and len(script.requests) == asked
    # Back to hybrid once the pause is over and the endpoint answers (in time on a busy host).
    provider._embeddings_retry_at = 0.0
    provider.query_timeout = 5.0
    with degraded.collect() as fell_back:
        assert (await provider.search(tenant, "u1", None, QUESTION))[0].content == VEGETARIAN
    assert fell_back == []


async def test_a_slow_endpoint_costs_only_the_searches_it_is_late_for(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    """An answer after the query timeout is lexical and said so, but the endpoint answered:
    the next search embeds its query again instead of leaving the endpoint alone."""
    provider = await facts_embedded(db, server, tenant, 0.3)
    script.faults = [Fault(delay=1.0)]
    with degraded.collect() as fell_back:
        hits = await provider.search(tenant, "u1", None, "cello weekends")
    assert fell_back == ["embeddings"]
    assert [h.content for h in hits] == ["The user plays the cello on weekends."]
    # Asked again at once, while the late answer is still on its way: hybrid (the time limit
    # raised, so that a busy host does not make this answer late too).
    provider.query_timeout = 5.0
    asked = len(script.requests)
    with degraded.collect() as fell_back:
        assert (await provider.search(tenant, "u1", None, QUESTION))[0].content == VEGETARIAN
    assert fell_back == [] and len(script.requests) == asked + 1
    await eventually(lambda: settled(provider), what="the late embeddings")
    assert provider._embeddings_retry_at == 0.0
    with degraded.collect() as fell_back:
        await provider.search(tenant, "u1", None, QUESTION)
    assert fell_back == []
    await provider.aclose()


async def test_a_late_answer_that_fails_leaves_the_endpoint_alone(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    provider = await facts_embedded(db, server, tenant, 0.2)
    script.faults = [Fault(delay=0.5, status=500)]
    with degraded.collect() as fell_back:
        await provider.search(tenant, "u1", None, QUESTION)
    assert fell_back == ["embeddings"]
    await eventually(lambda: settled(provider), what="the late embeddings")
    asked = len(script.requests)
    with degraded.collect() as fell_back:
        assert await provider.search(tenant, "u1", None, QUESTION) == []
    assert fell_back == ["embeddings"] and len(script.requests) == asked


async def test_an_endpoint_that_never_answers_is_left_alone(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    """Late answers pile up no further than the client's connections: then the endpoint
    is left alone, as after a failure."""
    provider = BuiltinProvider(db, embedder=client(server, timeout=20.0), query_timeout=0.1)
    await provider.add([memory(tenant, fact) for fact in FACTS])
    await backfill(db, server, tenant).run_until_done()
    script.faults = [Fault(delay=3.0)] * (EmbeddingClient.MAX_CONNECTIONS + 1)
    for _ in range(EmbeddingClient.MAX_CONNECTIONS + 1):
        with degraded.collect() as fell_back:
            hits = await provider.search(tenant, "u1", None, "cello weekends")
        assert fell_back == ["embeddings"] and len(hits) == 1
    assert len(provider._late) == EmbeddingClient.MAX_CONNECTIONS + 1
    assert provider._embeddings_retry_at > 0.0
    with degraded.collect() as fell_back:
        await provider.search(tenant, "u1", None, QUESTION)
    assert fell_back == ["embeddings"]
    assert len(provider._late) == EmbeddingClient.MAX_CONNECTIONS + 1  # nothing new asked
    await provider.aclose()
    await eventually(lambda: settled(provider), what="the late embeddings")


async def test_a_search_without_a_collector_notes_nothing(db: AsyncEngine, tenant: str) -> None:
    provider = BuiltinProvider(db, embedder=client(f"http://127.0.0.1:{free_port()}/v1"))
    await provider.add([memory(tenant, fact) for fact in FACTS])
    hits = await provider.search(tenant, "u1", None, "cello")
    assert [h.content for h in hits] == ["The user plays the cello on weekends."]


async def test_blocks_fill_up_and_users_keep_their_own(
    db: AsyncEngine, server: str, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK_MEMORIES", 4)
    users = ["u1", "u2"]
    for user in users:
        rows = [memory(tenant, f"{user} note {n} about trains.", user=user) for n in range(9)]
        await BuiltinProvider(db).add([*rows, memory(tenant, VEGETARIAN, user=user)])
    await backfill(db, server, tenant, batch_size=3, per_tick=3).run_until_done()
    provider = hybrid(db, server)
    for user in users:
        async with db.connect() as conn:
            found = await vector_blocks.load(conn, tenant, user, MODEL)
        assert [b.memories for b in found] == [4, 4, 2]
        assert len(set(vector_blocks.matrix_of(found, DIMENSION).ids)) == 10
        hits = await provider.search(tenant, user, None, QUESTION)
        assert hits[0].content == VEGETARIAN and hits[0].user_id == user
    await provider.aclose()


async def test_backfill_batches_bounds_each_tick_and_skips_deleted(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    provider = BuiltinProvider(db)
    stored = await provider.add([memory(tenant, f"Fact number {n}.") for n in range(12)])
    await provider.delete(tenant, [stored[0].id])
    job = backfill(db, server, tenant, batch_size=3, per_tick=7)
    first = await job.tick()
    assert first.stored == 7 and first.error is None
    assert all(len(batch) <= 3 for batch in script.batches)
    second = await job.tick()
    assert second.stored == 4  # the deleted memory is not embedded
    assert await vector_count(db, tenant) == 11
    assert (await job.tick()).stored == 0
    # Every stored vector is the unit vector of its memory's text, float32.
    async with db.connect() as conn:
        row = (
            await conn.execute(
                select(memory_embedding).where(memory_embedding.c.memory_id == stored[1].id)
            )
        ).one()
    assert row.model == MODEL and row.dims == DIMENSION and row.user_id == "u1"
    assert abs(np.linalg.norm(np.frombuffer(row.vector, dtype="<f4")) - 1.0) < 1e-5


async def test_backfill_retries_on_the_next_tick_when_the_endpoint_fails(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    await BuiltinProvider(db).add([memory(tenant, fact) for fact in FACTS])
    job = backfill(db, server, tenant, max_attempts=2, pause=0.3)
    script.faults = [503, 503, 503, 503]  # the batch (twice) and the probe (twice)
    failed = await job.tick()
    assert failed.stored == 0 and failed.error and "503" in failed.error
    assert await vector_count(db, tenant) == 0
    # Right after a failure the endpoint is left alone for a while.
    asked = len(script.requests)
    paused = await job.tick()
    assert paused.stored == 0 and paused.error and len(script.requests) == asked
    ticks = []

    async def recovered() -> bool:
        ticks.append(await job.tick())
        return ticks[-1].stored > 0

    await eventually(recovered, within=10, what="the backfill after its pause")
    assert ticks[-1].stored == len(FACTS) and ticks[-1].error is None
    assert await vector_count(db, tenant) == len(FACTS)


async def test_backfill_passes_over_a_text_the_endpoint_refuses(
    db: AsyncEngine, script: EmbeddingScript, server: str, tenant: str
) -> None:
    stored = await BuiltinProvider(db).add(
        [memory(tenant, f"Item {n} on the list.") for n in range(3)]
    )
    # The batch is refused, the probe answered, then the second memory alone is refused.
    script.faults = [400, Fault(), Fault(), 400]
    result = await backfill(db, server, tenant).tick()
    assert (result.stored, result.refused, result.error) == (2, 1, None)
    query = select(memory_embedding.c.memory_id).where(memory_embedding.c.tenant_id == tenant)
    async with db.connect() as conn:
        ids = set((await conn.execute(query)).scalars())
    assert ids == {stored[0].id, stored[2].id}


async def restamp(db: AsyncEngine, ids: list[str], seconds_ago: float) -> None:
    """Give memories a time of writing ``seconds_ago`` (another writer's clock, an import)."""
    stamp = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=seconds_ago)
    async with db.begin() as conn:
        t = long_term_memory
        await conn.execute(update(t).where(t.c.id.in_(ids)).values(created_at=stamp))


async def test_backfill_embeds_new_memories_before_an_old_backlog(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    provider = BuiltinProvider(db)
    backlog = await provider.add([memory(tenant, f"Old fact number {n}.") for n in range(4)])
    await restamp(db, [m.id for m in backlog], 2 * 86400)
    (new,) = await provider.add([memory(tenant, "Written just now.")])
    job = backfill(db, server, tenant, per_tick=2)
    assert (await job.tick()).stored == 1
    query = select(memory_embedding.c.memory_id).where(memory_embedding.c.tenant_id == tenant)
    async with db.connect() as conn:
        assert list((await conn.execute(query)).scalars()) == [new.id]
    assert (await job.run_until_done()).stored == 4


async def test_backfill_sees_rows_committed_late_with_an_earlier_time(
    db: AsyncEngine, server: str, tenant: str
) -> None:
    job = EmbeddingBackfill(db, client(server), lookback_seconds=60, tenant_id=tenant)
    provider = BuiltinProvider(db)
    await provider.add([memory(tenant, "Written first.")])
    assert (await job.run_until_done()).stored == 1

    async def written_at(content: str, seconds_ago: float) -> None:
        stored = await provider.add([memory(tenant, content)])
        await restamp(db, [stored[0].id], seconds_ago)

    # Stamped before the newest memory handled, but within the lookback: the next tick.
    await written_at("Stamped half a minute ago by a slow writer.", 30)
    assert (await job.run_until_done()).stored == 1
    # Stamped long before: only the next sweep from the beginning finds it.
    await written_at("Stamped two hours ago by a host whose clock is behind.", 7200)
    assert (await job.run_until_done()).stored == 0
    job.sweep_seconds = 0.0
    assert (await job.run_until_done()).stored == 1
    assert await vector_count(db, tenant) == 3


async def test_the_load_path_finds_by_meaning_and_says_when_it_cannot(
    services: Settings, script: EmbeddingScript, server: str, tenant: str
) -> None:
    """Through the API: a memory added by hand is embedded by the backfill and found by the
    question; with the endpoint gone, the answer is lexical and ``degraded`` says so."""
    settings = isolated_settings(embedding_base_url=server, embedding_model=MODEL)
    scope = {"tenant_id": tenant, "user_id": "u1", "agent_id": None}
    body = {**scope, "conversation_id": "c1"}
    async with client_for(settings) as api:
        for content in FACTS:
            added = await api.post(
                "/v1/memories",
                json={
                    **scope,
                    "cube_id": USER_PROFILE,
                    "memory_type": "text_mem",
                    "content": content,
                },
            )
            assert added.status_code == 201, added.text
        engine = create_engine(settings.database_url)
        try:
            assert (await backfill(engine, server, tenant).run_until_done()).stored == len(FACTS)
        finally:
            await engine.dispose()
        found = (await api.post("/v1/context", json={**body, "query": QUESTION})).json()
        assert [i["content"] for i in found["long_term"]["items"]] == [VEGETARIAN]
        # (The short-term part may run out of time on a busy host; the long-term one did not.)
        assert "embeddings" not in found["degraded"] and "long_term" not in found["degraded"]

        script.faults = [Fault(delay=5.0)] * 10
        lexical = (await api.post("/v1/context", json={**body, "query": "cello weekends"})).json()
        assert [i["content"] for i in lexical["long_term"]["items"]] == [FACTS[2]]
        assert "embeddings" in lexical["degraded"] and "long_term" not in lexical["degraded"]
        # The search endpoint says so too.
        search = {**scope, "query": "cello weekends", "top_k": 3}
        searched = (await api.post("/v1/memories/search", json=search)).json()
        assert searched["items"][0]["content"] == FACTS[2]
        assert searched["degraded"] == ["embeddings"]


async def test_a_worker_embeds_the_memories_its_long_term_chain_stores(
    services: Settings, server: str, tenant: str, start_worker
) -> None:
    """The backfill runs in the worker (on its group's leader) once an endpoint is set."""
    settings = isolated_settings(embedding_base_url=server, embedding_model=MODEL)
    start_worker(settings)
    said = [
        message(tenant, "c1", 0, role="user", content="I am vegetarian and I live in Berlin."),
        message(tenant, "c1", 1, role="assistant", content="Noted."),
    ]
    await publish(settings, "message-written", said)
    await publish(settings, "session-ended", [session_end(tenant, "c1")])
    engine = create_engine(settings.database_url)
    live = select(func.count()).where(
        long_term_memory.c.tenant_id == tenant, long_term_memory.c.deleted_at.is_(None)
    )

    async def embedded() -> bool:
        async with engine.connect() as conn:
            stored = int((await conn.execute(live)).scalar_one())
        return stored > 0 and await vector_count(engine, tenant) == stored

    try:
        await eventually(embedded, within=120, what="a vector for every memory the chain stored")
    finally:
        await engine.dispose()
