"""Ingest throughput: message-written events into MySQL and Redis.

Three figures from one run on the same services:
- memstream end to end: events published to Kafka until all are in MySQL and Redis, one worker;
- the reference design's per-message dual write (INSERT, then LPUSH, EXPIRE, LLEN and a
  conditional RPOP, one message after another);
- the sinks' own limit: multi-row INSERTs plus pipelined cache writes of the same events,
  no Kafka, no validation.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta

import orjson
import redis.asyncio as aioredis
from sqlalchemy import insert

from bench.support import isolated_settings, log_dir, start_worker
from memstream.kafka import caught_up, publish
from memstream.launch import eventually, free_port, stop_all
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.schema import conversation_message
from memstream.text.tokens import count_tokens

EVENTS = 50_000
CONVERSATIONS = 500
REFERENCE_SAMPLE = 5_000  # the per-message reference is slow; its rate is taken on a sample
BATCH = 2_000

TEXTS = [
    "Can you book me a table for two at the Italian place near the office on Friday?",
    "Sure, I found a table at 7pm at Trattoria Roma. Shall I confirm it?",
    "Yes please, and remember I am vegetarian.",
    "Done. I noted that you are vegetarian for future bookings.",
]


def events(tenant: str) -> list[dict[str, object]]:
    start = datetime(2026, 1, 1)
    out = []
    for i in range(EVENTS):
        conv = i % CONVERSATIONS
        n = i // CONVERSATIONS
        out.append(
            {
                "event_id": f"{tenant}-{i}",
                "tenant_id": tenant,
                "user_id": f"user-{conv}",
                "agent_id": "agent-bench",
                "conversation_id": f"conv-{conv}",
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"{TEXTS[n % len(TEXTS)]} ({n})",
                "created_at": (start + timedelta(seconds=i)).isoformat() + "Z",
            }
        )
    return out


def stored(e: dict[str, object]) -> StoredMessage:
    content = str(e["content"])
    return StoredMessage(
        tenant_id=str(e["tenant_id"]),
        conversation_id=str(e["conversation_id"]),
        event_id=str(e["event_id"]),
        user_id=str(e["user_id"]),
        agent_id=str(e["agent_id"]),
        role=str(e["role"]),
        message_type="chat",
        content=content,
        token_count=count_tokens(content),
        created_at=datetime.fromisoformat(str(e["created_at"])).replace(tzinfo=None),
        source_conversation_id=str(e["conversation_id"]),
    )


async def reference(settings: Settings, sample: list[dict[str, object]]) -> float:
    """The reference design's dual write, one message at a time (events/s)."""
    engine = create_engine(settings.database_url)
    client = aioredis.Redis.from_url(settings.redis_url)
    started = time.perf_counter()
    for e in sample:
        m = stored(e)
        async with engine.begin() as conn:
            await conn.execute(insert(conversation_message).values(**_row(m)))
        key = f"{settings.cache_prefix}ref:{m.tenant_id}:{m.conversation_id}"
        await client.lpush(key, orjson.dumps(_row(m), default=str))
        await client.expire(key, settings.cache_ttl_seconds)
        if await client.llen(key) > settings.cache_max_messages:
            await client.rpop(key)
    elapsed = time.perf_counter() - started
    await client.aclose()
    await engine.dispose()
    return len(sample) / elapsed


def _row(m: StoredMessage) -> dict[str, object]:
    return {f: getattr(m, f) for f in StoredMessage.__dataclass_fields__}


async def sinks(settings: Settings, evs: list[dict[str, object]]) -> float:
    """Multi-row INSERTs plus pipelined cache writes, no Kafka (events/s)."""
    engine = create_engine(settings.database_url)
    client = aioredis.Redis.from_url(settings.redis_url)
    store = MessageStore(engine)
    cache = RedisCache(client, prefix=settings.cache_prefix)
    messages = [stored(e) for e in evs]
    started = time.perf_counter()
    for i in range(0, len(messages), BATCH):
        batch = messages[i : i + BATCH]
        await store.insert_many(batch)
        by_conv: dict[tuple[str, str], list[StoredMessage]] = {}
        for m in batch:
            by_conv.setdefault((m.tenant_id, m.conversation_id), []).append(m)
        cold = await cache.append(by_conv)
        await cache.warm({c: by_conv[c] for c in cold})
    elapsed = time.perf_counter() - started
    await client.aclose()
    await engine.dispose()
    return len(messages) / elapsed


async def end_to_end(
    settings: Settings,
    tenant: str,
    evs: list[dict[str, object]],
    *,
    backlog: bool,
    workers: int = 1,
) -> tuple[float, int]:
    """Events/s until all are in MySQL and Redis, and the worker's peak RSS.

    live: the worker runs and the events are published meanwhile (timed from the first
    publish); backlog: the events wait in Kafka first, like a replay (timed from the first
    stored row, so the worker's start-up is left out).
    """
    engine = create_engine(settings.database_url)
    store = MessageStore(engine)
    client = aioredis.Redis.from_url(settings.redis_url)
    cache = RedisCache(client, prefix=settings.cache_prefix)
    if backlog:
        await publish(settings, "message-written", evs)
    logs = log_dir("ingest")
    procs = [
        start_worker(settings.model_copy(update={"worker_web_port": free_port()}), logs)
        for _ in range(workers)
    ]
    try:
        warmup = [] if backlog else [{**evs[0], "event_id": "warmup"}]
        if warmup:  # the worker has its partitions once a first event is stored
            await publish(settings, "message-written", warmup)

        async def warm() -> bool:
            return await store.count(tenant) >= 1

        await eventually(warm, within=120, what="worker ready")
        started = time.perf_counter()
        if not backlog:
            await publish(settings, "message-written", evs)

        async def done() -> bool:
            if await store.count(tenant) < len(evs) + len(warmup):
                return False
            last = evs[-1]
            cached = await cache.recent(tenant, str(last["conversation_id"]), 1)
            return bool(cached and cached[-1].event_id == last["event_id"])

        await eventually(done, within=600, what="all events stored and cached")
        elapsed = time.perf_counter() - started
        await eventually(lambda: caught_up(settings, "message-written"), within=60)
        return len(evs) / elapsed, max(peak_rss_kib(p.pid) for p in procs)
    finally:
        stop_all(procs, timeout=30)
        await client.aclose()
        await engine.dispose()


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    print(f"ingest: {EVENTS} message-written events over {CONVERSATIONS} conversations")
    ref_rate = await reference(
        isolated_settings(), events(f"ref-{uuid.uuid4().hex[:8]}")[:REFERENCE_SAMPLE]
    )
    sink_rate = await sinks(isolated_settings(), events(f"sink-{uuid.uuid4().hex[:8]}"))
    runs = {}
    for mode, workers in (("live", 1), ("backlog", 1), ("backlog, 2 workers", 2)):
        tenant = f"e2e-{uuid.uuid4().hex[:8]}"
        settings = isolated_settings(
            topic_partitions=8, worker_web_port=free_port(), log_level="WARNING"
        )
        runs[mode] = await end_to_end(
            settings, tenant, events(tenant), backlog=mode.startswith("backlog"), workers=workers
        )
    sampled = f"({REFERENCE_SAMPLE} sampled)"
    print(f"  reference per-message dual write : {ref_rate:9.0f} events/s {sampled}")
    print(f"  sinks' limit (batched, no Kafka) : {sink_rate:9.0f} events/s")
    for mode, (rate, rss_kib) in runs.items():
        print(f"  memstream end to end, {mode}: {rate:.0f} events/s")
        print(f"    / reference                    : {rate / ref_rate:9.1f}x")
        print(f"    / sinks' limit                 : {rate / sink_rate:9.2f}")
        print(f"    peak RSS of a worker           : {rss_kib / 1024:9.0f} MiB")
