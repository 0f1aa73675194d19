"""How fast the worker's term backfill makes imported memories searchable: ``BENCH_BACKFILL_ROWS``
(20,000) memories of 10-20 words inserted into ``long_term_memory`` by SQL with the fixed
columns only (as a bulk import writes them), on the database of ``MEMSTREAM_DATABASE_URL``,
then indexed by ``TermBackfill`` until none is left; the baseline is the same backfill as it
was, two statements a memory (its postings, then its length), on the same rows indexed again.
Memories per second of each, the ratio, and the database's CPU per memory when it listens on
this machine. ``python -m bench termbackfill``."""

from __future__ import annotations

import os
import random
import time
import uuid
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.loadpath.data import memories
from bench.loadpath.servers import listening_pid, process_times
from memstream.identity import content_hash
from memstream.memory import NewMemory
from memstream.retrieval import document_terms
from memstream.settings import Settings
from memstream.store import postings
from memstream.store.database import create_engine, migrate
from memstream.store.schema import long_term_memory as t
from memstream.store.schema import memory_term as p

ROWS = int(os.environ.get("BENCH_BACKFILL_ROWS", "20000"))
PER_USER = 200


def _imported(tenant: str) -> list[dict[str, object]]:
    rng = random.Random(5)
    out: list[dict[str, object]] = []
    for u in range(0, ROWS, PER_USER):
        batch: list[NewMemory] = memories(tenant, f"u{u // PER_USER}", rng, PER_USER, PER_USER // 4)
        for memory in batch[: ROWS - u]:
            out.append(
                {
                    "id": uuid.uuid4().hex,
                    "tenant_id": tenant,
                    "user_id": memory.user_id,
                    "agent_id": memory.agent_id,
                    "cube_id": memory.cube_id,
                    "memory_type": memory.memory_type,
                    "content": memory.content,
                    "importance": memory.importance,
                    "source_event_ids": [],
                    "content_hash": content_hash(memory.content),
                    "created_at": datetime(2026, 1, 1),
                }
            )
    return out


async def _per_memory(engine: AsyncEngine, tenant: str, per_tick: int = 500) -> int:
    """The backfill as it was: the postings of each memory, then its length, one at a time."""
    total = 0
    while True:
        query = (
            select(t.c.id, t.c.tenant_id, t.c.user_id, t.c.cube_id, t.c.content)
            .where(t.c.term_count.is_(None), t.c.deleted_at.is_(None), t.c.tenant_id == tenant)
            .limit(per_tick)
        )
        async with engine.connect() as conn:
            pending = (await conn.execute(query)).all()
        if not pending:
            return total
        async with engine.begin() as conn:
            for row in pending:
                terms = document_terms(row.content)
                rows = postings.rows_of(
                    row.tenant_id, row.user_id, row.id, terms, cube_id=row.cube_id
                )
                await postings.write(conn, rows)
                await conn.execute(
                    update(t)
                    .where(t.c.id == row.id, t.c.term_count.is_(None))
                    .values(term_count=terms.length)
                )
        total += len(pending)


async def _reset(engine: AsyncEngine, tenant: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(delete(p).where(p.c.tenant_id == tenant))
        await conn.execute(update(t).where(t.c.tenant_id == tenant).values(term_count=None))


def _db_seconds(pid: int | None) -> float:
    return sum(process_times(pid)) if pid else 0.0


async def main() -> None:
    url = Settings().database_url
    await migrate(url)
    engine = create_engine(url)
    tenant = f"bench-backfill-{uuid.uuid4().hex[:8]}"
    pid = listening_pid(url)
    try:
        rows = _imported(tenant)
        async with engine.begin() as conn:
            for chunk in range(0, len(rows), 1000):
                await conn.execute(t.insert(), rows[chunk : chunk + 1000])
        print(f"termbackfill: {len(rows):,} memories imported by SQL into {engine.url.database}")
        rates: dict[str, float] = {}
        for name in ("batched (now)", "two statements a memory (before)"):
            await _reset(engine, tenant)
            db_before, started = _db_seconds(pid), time.perf_counter()
            cpu_before = time.process_time()
            if name.startswith("batched"):
                done = await postings.TermBackfill(engine, tenant_id=tenant).run_until_done()
            else:
                done = await _per_memory(engine, tenant)
            took = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            db = _db_seconds(pid) - db_before
            rates[name] = done / took
            print(
                f"  {name:34} {done:,} memories in {took:.1f} s: {done / took:,.0f}/s;"
                f" worker CPU {1e6 * cpu / done:.0f} µs, database CPU {1e6 * db / done:.0f} µs"
                " a memory"
            )
        ratio = rates["batched (now)"] / rates["two statements a memory (before)"]
        print(f"  batched / before: {ratio:.2f}x")
        async with engine.connect() as conn:
            postings_count = len(
                (await conn.execute(select(p.c.term).where(p.c.tenant_id == tenant))).all()
            )
        print(f"  {postings_count / len(rows):.1f} postings a memory")
    finally:
        async with engine.begin() as conn:
            await conn.execute(delete(p).where(p.c.tenant_id == tenant))
            await conn.execute(delete(t).where(t.c.tenant_id == tenant))
        await engine.dispose()
