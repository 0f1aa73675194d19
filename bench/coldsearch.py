"""A cold user's first search, lexical and hybrid: the stored forms against the old warm-up.

One user with 10,000 memories in the built-in store, each with a 384-dimensional vector
packed by the embedding backfill from a local endpoint; each query is searched by a process
that never saw the user, four ways in the same run: stored postings, the old per-user index
built first, hybrid on the packed int8 blocks, and hybrid with the index and float32 vectors
read row by row. The answers are compared and the median wall times and their ratios
printed. ``python -m bench coldsearch``; ``BENCH_COLD_MEMORIES``, ``BENCH_COLD_QUERIES``."""

from __future__ import annotations

import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable

import numpy as np
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.loadpath.data import fill, query_text, user_text
from bench.support import isolated_settings
from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory, agent_cube, readable_cubes
from memstream.providers.builtin import BuiltinProvider
from memstream.providers.builtin.index_cache import UserIndexCache
from memstream.providers.builtin.ranking import (
    hybrid_candidates,
    lexical_pools,
    pick_hybrid,
    pick_lexical,
)
from memstream.retrieval import MMR_LAMBDA, RELATIVITY, query_terms
from memstream.store import embeddings as vector_rows
from memstream.store.database import create_engine, migrate
from memstream.store.schema import (
    long_term_memory,
    memory_embedding,
    memory_term,
    memory_vector_block,
)
from memstream.text.terms import tokenize
from tests.fakes.embeddings import EmbeddingScript, embeddings_app
from tests.fakes.http import serve

MEMORIES = int(os.environ.get("BENCH_COLD_MEMORIES", "10000"))
QUERIES = int(os.environ.get("BENCH_COLD_QUERIES", "15"))
AGENT = "cold-agent"
TOP_K = 10
DIMENSION = 384
MODEL = "bench-cold-vectors"


def memories(tenant: str, user: str, rng: random.Random) -> list[NewMemory]:
    """``MEMORIES`` distinct memories, a third in the profile, the rest in the agent's cube."""
    seen: set[str] = set()
    out: list[NewMemory] = []
    while len(out) < MEMORIES:
        content = f"{user_text(rng)} {fill('It was in {month}.', rng)}"
        if content in seen:
            content = f"{content} (again, note {len(out)})"
        seen.add(content)
        cube = USER_PROFILE if len(out) % 3 == 0 else agent_cube(AGENT)
        agent = None if cube == USER_PROFILE else AGENT
        out.append(NewMemory(tenant, user, agent, cube, "text_mem", content))
    return out


async def index_build_search(
    engine: AsyncEngine, tenant: str, user: str, query: str
) -> list[MemoryItem]:
    """A cold search as it ran before the postings: the user's index built first."""
    cache = UserIndexCache(
        engine, users=1, memories=MEMORIES * 2, revalidate_seconds=300.0, fresh_seconds=0.0
    )
    entry, _ = await cache.get(tenant, user, None)
    items = entry.items
    scores = entry.index.relevance(tokenize(query))
    pools = lexical_pools(
        scores, lambda i: items[i].cube_id, readable_cubes(AGENT), TOP_K, RELATIVITY
    )
    return pick_lexical(pools, items, entry.index.token_set, TOP_K, MMR_LAMBDA)


async def index_build_hybrid(
    engine: AsyncEngine, tenant: str, user: str, query: str, query_vector: np.ndarray
) -> list[MemoryItem]:
    """A cold hybrid search as it ran before the blocks: the user's index built and the
    user's vectors read one row each, then the same ranking."""
    cache = UserIndexCache(
        engine, users=1, memories=MEMORIES * 2, revalidate_seconds=300.0, fresh_seconds=0.0
    )
    entry, _ = await cache.get(tenant, user, MODEL)
    async with engine.connect() as conn:
        ids, matrix = await vector_rows.load(conn, tenant, user, MODEL, DIMENSION)
    items = entry.items
    live = [n for n, memory_id in enumerate(ids) if memory_id in items]
    ids = [ids[n] for n in live]
    cosines = np.einsum("ij,j->i", matrix[live], query_vector.astype(np.float32))
    cubes = readable_cubes(AGENT)
    terms = query_terms(tokenize(query))
    found = hybrid_candidates(
        entry.index.relevance(terms) if terms else {},
        lambda i: items[i].cube_id,
        ids,
        [items[i].cube_id for i in ids],
        cosines,
        cubes,
        TOP_K,
    )
    return pick_hybrid(found, items, entry.index.token_set, cubes, TOP_K, BuiltinProvider(engine))


async def timed(search: Awaitable[list[MemoryItem]]) -> tuple[float, float, list[MemoryItem]]:
    """Wall and CPU seconds of one search, and its answer."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = await search
    return time.perf_counter() - wall, time.process_time() - cpu, found


def near(vector: np.ndarray, rng: random.Random) -> list[float]:
    """A unit vector at cosine about 0.6 to ``vector`` (a query about that memory)."""
    noise = np.array([rng.gauss(0.0, 1.0) for _ in range(DIMENSION)])
    noise /= np.linalg.norm(noise)
    mixed = 0.6 * vector + 0.8 * noise
    return [float(x) for x in mixed / np.linalg.norm(mixed)]


def report(name: str, walls: list[float], cpus: list[float]) -> None:
    print(
        f"  {name}  p50 {1000 * statistics.median(walls):7.1f} ms"
        f"  max {1000 * max(walls):7.1f} ms"
        f"  CPU p50 {1000 * statistics.median(cpus):6.1f} ms"
    )


async def main() -> None:
    settings = isolated_settings()
    await migrate(settings.database_url)
    engine = create_engine(settings.database_url)
    tenant, user = f"bench-cold-{uuid.uuid4().hex[:8]}", "cold-user"
    rng = random.Random(19)
    script = EmbeddingScript(dimension=DIMENSION)
    try:
        with serve(embeddings_app(script)) as endpoint:
            await run(engine, tenant, user, rng, script, f"{endpoint}/v1")
    finally:
        async with engine.begin() as conn:
            for table in (memory_vector_block, memory_embedding, memory_term, long_term_memory):
                await conn.execute(delete(table).where(table.c.tenant_id == tenant))
        await engine.dispose()


async def run(
    engine: AsyncEngine,
    tenant: str,
    user: str,
    rng: random.Random,
    script: EmbeddingScript,
    endpoint: str,
) -> None:
    started = time.perf_counter()
    writer = BuiltinProvider(engine)
    batch = memories(tenant, user, rng)
    for start in range(0, len(batch), 500):
        await writer.add(batch[start : start + 500])
    took = time.perf_counter() - started
    print(f"cold search: {MEMORIES:,} memories of one user written in {took:.1f} s")
    started = time.perf_counter()
    embed = EmbeddingClient(endpoint, MODEL, batch_size=256)
    filled = await EmbeddingBackfill(engine, embed, tenant_id=tenant).run_until_done()
    await embed.aclose()
    took = time.perf_counter() - started
    print(f"  {filled.stored:,} vectors stored and {filled.packed:,} packed in {took:.1f} s")
    async with engine.connect() as conn:
        ids, matrix = await vector_rows.load(conn, tenant, user, MODEL, DIMENSION)
    queries = [query_text(rng) for _ in range(QUERIES)]
    vectors = {}
    for query in queries:
        vectors[query] = near(matrix[rng.randrange(len(ids))], rng)
        script.meanings[query] = vectors[query]
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    same_lexical = same_hybrid = 0

    async def measure(name: str, search: Awaitable[list[MemoryItem]]) -> list[MemoryItem]:
        wall, cpu, found = await timed(search)
        walls.setdefault(name, []).append(wall)
        cpus.setdefault(name, []).append(cpu)
        return found

    for query in queries:
        cold = BuiltinProvider(engine)  # a process that never saw the user
        found = await measure("lexical, postings     ", cold.search(tenant, user, AGENT, query))
        expected = await measure(
            "lexical, index build  ", index_build_search(engine, tenant, user, query)
        )
        same_lexical += [(m.id, m.score) for m in found] == [(m.id, m.score) for m in expected]
        hybrid = BuiltinProvider(engine, embedder=EmbeddingClient(endpoint, MODEL))
        await hybrid.embedder.embed_one("warm the client's connection")  # type: ignore[union-attr]
        found = await measure("hybrid, blocks        ", hybrid.search(tenant, user, AGENT, query))
        await hybrid.aclose()
        vector = np.array(vectors[query], dtype=np.float32)
        expected = await measure(
            "hybrid, index build   ", index_build_hybrid(engine, tenant, user, query, vector)
        )
        same_hybrid += [m.id for m in found] == [m.id for m in expected]
    print(f"  {QUERIES} queries, top_k {TOP_K}, agent and profile cubes")
    for name in walls:
        report(name, walls[name], cpus[name])
    names = list(walls)
    for new, old in ((names[0], names[1]), (names[2], names[3])):
        ratio = statistics.median(walls[old]) / statistics.median(walls[new])
        print(f"  ratio ({old.strip()} / {new.strip()}, p50): {ratio:.1f}x")
    print(f"  same lexical answers (ids and scores): {same_lexical} of {QUERIES}")
    print(f"  same hybrid answers (ids): {same_hybrid} of {QUERIES}")
