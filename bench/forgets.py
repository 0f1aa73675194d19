"""What honouring forgets costs the history stage's hot path: batches of 500 messages written
by ``HistoryWriter`` without forgets (the path before forgets were recorded: the baseline) and
with them (the rows added since read before and after each batch), with 1,000 users forgotten,
alternating, in a database of its own on the shared MariaDB. Prints the process CPU time and
the wall time per batch of each, their ratio, and the cost of the one lookup a batch adds.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid

import orjson
from sqlalchemy import delete
from sqlalchemy.engine import make_url

from bench.support import isolated_settings
from memstream.events.deadletter import SourceRecord
from memstream.history import HistoryWriter
from memstream.store.database import create_engine, migrate
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.messages import MessageStore
from memstream.store.rebuilds import CacheRebuilds
from memstream.store.schema import conversation_message, user_forget

BATCH = 500
ROUNDS = 4
BATCHES = 10  # per round and variant
FORGOTTEN = 1_000
REFRESHES = 200


async def no_dead_letters(letters: object) -> None:
    raise AssertionError(f"unexpected dead letters: {letters!r}")


def records(tenant: str, topic: str, start: int) -> list[SourceRecord]:
    out = []
    for n in range(start, start + BATCH):
        value = {
            "event_id": f"e{n}",
            "tenant_id": tenant,
            "user_id": f"user-{n % 50}",
            "agent_id": "agent-1",
            "conversation_id": f"c{n % 50}",
            "role": "user",
            "content": f"Message {n}: I would like a table for two on Friday, near the office.",
        }
        out.append(SourceRecord(topic, n % 4, n, time.time(), b"c", orjson.dumps(value)))
    return out


async def main() -> None:
    base = isolated_settings()
    url = make_url(base.database_url).set(database="memstream_bench_forgets")
    await migrate(url)
    engine = create_engine(url)
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    topic = base.topic("message-written")
    store = ForgetStore(engine)
    for n in range(FORGOTTEN):
        await store.record(tenant, f"gone-{n}", {topic: {p: 10**9 for p in range(4)}}, purge=True)
    writers = {
        "without forgets": HistoryWriter(
            MessageStore(engine), None, no_dead_letters, rebuilds=CacheRebuilds(engine),
            max_content_chars=32768,
        ),
        "with forgets": HistoryWriter(
            MessageStore(engine), None, no_dead_letters, rebuilds=CacheRebuilds(engine),
            max_content_chars=32768, forgets=ForgetSet(store),
        ),
    }  # fmt: skip
    cpu: dict[str, list[float]] = {name: [] for name in writers}
    wall: dict[str, list[float]] = {name: [] for name in writers}
    offset = 0
    try:
        for _ in range(ROUNDS):
            for name, writer in writers.items():
                for _ in range(BATCHES):
                    batch = records(tenant, topic, offset)
                    offset += BATCH
                    started, started_cpu = time.perf_counter(), time.process_time()
                    await writer.process(batch)
                    cpu[name].append(time.process_time() - started_cpu)
                    wall[name].append(time.perf_counter() - started)
        # The lookup itself, alone: what the batches above pay once each.
        copy = writers["with forgets"].forgets
        assert copy is not None
        started_cpu, started = time.process_time(), time.perf_counter()
        for _ in range(REFRESHES):
            await copy.refresh(fresh=True)
        refresh_cpu = (time.process_time() - started_cpu) / REFRESHES
        refresh_wall = (time.perf_counter() - started) / REFRESHES
    finally:
        async with engine.begin() as conn:
            await conn.execute(
                delete(conversation_message).where(conversation_message.c.tenant_id == tenant)
            )
            await conn.execute(delete(user_forget).where(user_forget.c.tenant_id == tenant))
        await engine.dispose()
    print(
        f"history batches of {BATCH} messages, {FORGOTTEN} users forgotten,"
        f" load {os.getloadavg()[0]:.2f}"
    )
    for name in writers:
        print(
            f"  {name:16} CPU {statistics.median(cpu[name]) * 1000:7.2f} ms/batch"
            f"  wall {statistics.median(wall[name]) * 1000:7.2f} ms/batch"
            f" (median of {len(cpu[name])})"
        )
    print(
        f"  one lookup of the forgets added since: CPU {refresh_cpu * 1000:.2f} ms,"
        f" wall {refresh_wall * 1000:.2f} ms (mean of {REFRESHES})"
    )
    ratio = statistics.median(cpu["with forgets"]) / statistics.median(cpu["without forgets"])
    wall_ratio = statistics.median(wall["with forgets"]) / statistics.median(
        wall["without forgets"]
    )
    print(f"  ratio with/without: CPU {ratio:.3f}, wall {wall_ratio:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
