"""A cold user's first lexical search: the stored postings against the in-memory index build.

One user with 10,000 long-term memories in the built-in store (MariaDB or SQLite, the
settings' database), written through the provider (so their postings are stored with them).
Each query is searched by a process that has never seen the user, twice in the same run:

- postings: ``MySQLProvider.search`` as it runs now, the postings of the query's terms and
  the user's live count in one statement, then the candidates' rows;
- index build: what a cold search did before, every live memory of the user read and
  tokenized into a ``LexicalIndex`` (the per-user cache, cold), then the same ranking.

Both answers are compared (ids and scores), and the median wall time of each and their ratio
printed. ``python -m bench coldsearch``; ``BENCH_COLD_MEMORIES`` and ``BENCH_COLD_QUERIES``
change the sizes.
"""

from __future__ import annotations

import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.loadpath.data import fill, query_text, user_text
from bench.support import isolated_settings
from memstream.memory import USER_PROFILE, MemoryItem, NewMemory, agent_cube, readable_cubes
from memstream.providers.builtin import MySQLProvider
from memstream.providers.builtin.index_cache import UserIndexCache
from memstream.providers.builtin.ranking import lexical_pools, pick_lexical
from memstream.retrieval import MMR_LAMBDA, RELATIVITY
from memstream.store.database import create_engine, migrate
from memstream.store.schema import long_term_memory, memory_term
from memstream.text.terms import tokenize

MEMORIES = int(os.environ.get("BENCH_COLD_MEMORIES", "10000"))
QUERIES = int(os.environ.get("BENCH_COLD_QUERIES", "15"))
AGENT = "cold-agent"
TOP_K = 10


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


async def timed(search: Awaitable[list[MemoryItem]]) -> tuple[float, float, list[MemoryItem]]:
    """Wall and CPU seconds of one search, and its answer."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = await search
    return time.perf_counter() - wall, time.process_time() - cpu, found


async def main() -> None:
    settings = isolated_settings()
    await migrate(settings.database_url)
    engine = create_engine(settings.database_url)
    tenant, user = f"bench-cold-{uuid.uuid4().hex[:8]}", "cold-user"
    rng = random.Random(19)
    try:
        started = time.perf_counter()
        writer = MySQLProvider(engine)
        batch = memories(tenant, user, rng)
        for start in range(0, len(batch), 500):
            await writer.add(batch[start : start + 500])
        took = time.perf_counter() - started
        print(f"cold search: {MEMORIES:,} memories of one user written in {took:.1f} s")
        queries = [query_text(rng) for _ in range(QUERIES)]
        postings_wall: list[float] = []
        postings_cpu: list[float] = []
        build_wall: list[float] = []
        build_cpu: list[float] = []
        same = 0
        for query in queries:
            cold = MySQLProvider(engine)  # a process that never saw the user
            wall, cpu, found = await timed(cold.search(tenant, user, AGENT, query))
            postings_wall.append(wall)
            postings_cpu.append(cpu)
            wall, cpu, expected = await timed(index_build_search(engine, tenant, user, query))
            build_wall.append(wall)
            build_cpu.append(cpu)
            same += [(m.id, m.score) for m in found] == [(m.id, m.score) for m in expected]
        p50_postings = statistics.median(postings_wall)
        p50_build = statistics.median(build_wall)
        print(f"  {QUERIES} queries, top_k {TOP_K}, agent and profile cubes")
        for name, walls, cpus in (
            ("postings   ", postings_wall, postings_cpu),
            ("index build", build_wall, build_cpu),
        ):
            print(
                f"  {name}  p50 {1000 * statistics.median(walls):7.1f} ms"
                f"  max {1000 * max(walls):7.1f} ms"
                f"  CPU p50 {1000 * statistics.median(cpus):6.1f} ms"
            )
        print(f"  ratio (index build / postings, p50): {p50_build / p50_postings:.1f}x")
        print(f"  same answers (ids and scores): {same} of {QUERIES}")
    finally:
        async with engine.begin() as conn:
            for table in (memory_term, long_term_memory):
                await conn.execute(delete(table).where(table.c.tenant_id == tenant))
        await engine.dispose()
