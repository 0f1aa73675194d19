"""The load path with a Redis Cluster master lost, against the same cluster whole (the baseline),
in one run: ``python -m bench cacheloss``.

A cluster of three masters of its own (``redis-server`` on free ports), 60 conversations of 20
turns in the record and the cache; ``/v1/context`` on an in-process API, one request at a time
round the conversations, first with the cluster whole, then with one master killed. Prints
p50 and p99 of each, their ratio, and how many answers held their newest turn in time.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine
from memstream.store.messages import MessageStore, StoredMessage
from memstream.text.tokens import count_tokens
from tests.support.api import client_for
from tests.support.redis_cluster import start_cluster

CONVERSATIONS = 60
TURNS = 20
REQUESTS = int(os.environ.get("BENCH_CACHELOSS_REQUESTS", "600"))


def history(tenant: str, conversation: str) -> list[StoredMessage]:
    start = datetime(2026, 5, 1, 8, 0)
    return [
        StoredMessage(
            tenant_id=tenant,
            conversation_id=conversation,
            event_id=f"{conversation}-{i}",
            user_id="u1",
            agent_id="a1",
            role="user" if i % 2 == 0 else "assistant",
            message_type="chat",
            content=f"turn {i} of {conversation}",
            token_count=count_tokens(f"turn {i} of {conversation}"),
            created_at=start + timedelta(seconds=i),
            source_conversation_id=conversation,
        )
        for i in range(TURNS)
    ]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(api, tenant: str) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    """Latencies (ms) of ``REQUESTS`` answers, and how many held their newest turn in time."""
    took, full = [], 0
    for n in range(REQUESTS):
        conversation = f"c{n % CONVERSATIONS}"
        started = time.perf_counter()
        response = await api.post(
            "/v1/context",
            json={"tenant_id": tenant, "user_id": "u1", "agent_id": "a1",
                  "conversation_id": conversation, "query": "hello"},
        )  # fmt: skip
        took.append(1000 * (time.perf_counter() - started))
        body = response.json()
        newest = f"turn {TURNS - 1} of {conversation}"
        if "short_term" not in body["degraded"] and body["messages"][-1]["content"] == newest:
            full += 1
    return took, full


async def main() -> None:
    tenant = f"bench-cacheloss-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="memstream-cacheloss-") as directory:
        cluster = start_cluster(Path(directory))
        try:
            settings = Settings(
                redis_url=cluster.url, redis_cluster=True, cache_prefix=f"{tenant}:"
            )
            engine = create_engine(settings.database_url)
            conversations = {
                (tenant, f"c{i}"): history(tenant, f"c{i}") for i in range(CONVERSATIONS)
            }
            await MessageStore(engine).insert_many([m for ms in conversations.values() for m in ms])
            cache = RedisCache.from_url(cluster.url, cluster=True, prefix=settings.cache_prefix)
            await cache.warm(conversations)
            await cache.close()
            await engine.dispose()
            async with client_for(settings) as api:
                await run(api, tenant)  # warm-up: connections, the layout, the config cache
                whole, whole_full = await run(api, tenant)
                cluster.nodes[1].kill()
                lost, lost_full = await run(api, tenant)
        finally:
            cluster.stop()
    p50w, p99w = quantile(whole, 0.5), quantile(whole, 0.99)
    p50l, p99l = quantile(lost, 0.5), quantile(lost, 0.99)
    print(f"cacheloss: {REQUESTS} requests each, one at a time, in process")
    print(f"  cluster whole (baseline): p50 {p50w:.1f} ms, p99 {p99w:.1f} ms, full {whole_full}")
    print(f"  one master of three lost: p50 {p50l:.1f} ms, p99 {p99l:.1f} ms, full {lost_full}")
    print(f"  p99 lost / whole: {p99l / p99w:.2f}")
