"""A user's sessions through the whole long-term chain with split stage roles while workers
are killed, added and stopped: every user ends with the newer of two contradicting facts live,
and no memory is lost or stored twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import readiness
from memstream.broker.groups import live_members
from memstream.broker.topics import ensure_topics, publish
from memstream.settings import Settings
from memstream.store.schema import long_term_memory
from memstream.topology import PUBLIC_TOPICS, internal_topics
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

USERS = 30
FIRST = ("I live in Lisbon with my partner.", "I am allergic to peanuts.", "I play tennis.")
SECOND = ("I moved from Lisbon to Berlin last month.",)
# Three facts and an episode per statement; Lisbon expired by Berlin: seven live.
LIVE_PER_USER = 7


def session(tenant: str, user: str, n: int, said: tuple[str, ...]) -> list[dict[str, Any]]:
    """The messages of a user's ``n``-th session, ten minutes after the one before."""
    events = []
    for text in said:
        for role, content in (("user", text), ("assistant", "Noted.")):
            k = len(events)
            events.append(
                {
                    "event_id": f"{user}-s{n}-{k}",
                    "tenant_id": tenant,
                    "user_id": user,
                    "agent_id": "agent-1",
                    "conversation_id": f"{user}-s{n}",
                    "role": role,
                    "content": content,
                    "created_at": f"2026-01-01T00:{10 * n:02d}:{k:02d}Z",
                }
            )
    return events


def ended(tenant: str, user: str, n: int) -> dict[str, Any]:
    return {
        "event_id": f"end-{user}-s{n}",
        "tenant_id": tenant,
        "user_id": user,
        "agent_id": "agent-1",
        "conversation_id": f"{user}-s{n}",
    }


async def memories(engine: AsyncEngine, tenant: str) -> dict[str, list[tuple[str, bool]]]:
    """Every memory of the tenant, by user: (content, live)."""
    t = long_term_memory
    query = select(t.c.user_id, t.c.content, t.c.deleted_at).where(t.c.tenant_id == tenant)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    out: dict[str, list[tuple[str, bool]]] = {}
    for row in rows:
        out.setdefault(row.user_id, []).append((row.content, row.deleted_at is None))
    return out


def own_port(settings: Settings) -> Settings:
    return settings.model_copy(update={"worker_web_port": free_port()})


async def test_every_user_ends_with_the_newer_fact_through_worker_faults(
    services, tenant, engine, start_worker, monkeypatch
):
    # A SIGKILLed member's partitions move once its session times out: ten seconds, not the
    # minute Faust waits by default, so that the test waits for the chain, not the broker.
    monkeypatch.setenv("BROKER_SESSION_TIMEOUT", "10")
    settings = isolated_settings(
        topic_partitions=4,
        retry_base_seconds=1.0,
        retry_max_delay_seconds=2.0,
        retry_horizon_seconds=900,
    )
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    users = [f"u{n}" for n in range(USERS)]
    history = start_worker(settings, "history-1", stages="history")
    memory = [start_worker(own_port(settings), "memory-1", stages="summary,longterm")]

    async def consuming() -> bool:
        return (await readiness.workers(settings)).consuming

    await eventually(consuming, within=90, what="every role consuming")
    # The second worker joins while nothing is committed on the chain's partitions yet: records
    # fetched during that rebalance must be read again from the partitions' beginnings.
    group = f"{settings.app_id}-summary-longterm"
    memory.append(start_worker(own_port(settings), "memory-2", stages="summary,longterm"))

    async def both_joined() -> bool:
        return len(await live_members(settings, group)) == 2 and await consuming()

    await eventually(both_joined, within=60, what="the second memory worker in the group")
    # The history worker dies first: the session ends wait for their messages, and the
    # rebalances that follow send the waiting ones to the retry tiers, each as often as it
    # happened to be in flight, so that a user's second session can come back before the first.
    history.kill()
    sessions = ((1, FIRST), (2, SECOND))
    messages = [e for u in users for n, said in sessions for e in session(tenant, u, n, said)]
    await publish(settings, "message-written", messages)
    await publish(settings, "session-ended", [ended(tenant, u, 1) for u in users])
    await publish(settings, "session-ended", [ended(tenant, u, 2) for u in users])
    memory[0].kill()
    memory.append(start_worker(own_port(settings), "memory-3", stages="summary,longterm"))

    def joined(worker: Any) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return "Joined group" in worker.log()

        return check

    # Each next fault waits until the worker just started has joined its group, so that the
    # rebalances overlap the chain instead of following a clock.
    await eventually(joined(memory[2]), within=60, what="the third memory worker joining")
    history = start_worker(settings, "history-2", stages="history")
    await eventually(joined(history), within=60, what="the second history worker joining")
    memory[1].stop()

    async def settled() -> bool:
        found = await memories(engine, tenant)
        return all(sum(live for _, live in found.get(u, [])) >= LIVE_PER_USER for u in users)

    await eventually(settled, within=120, what="both sessions of every user applied")
    found = await memories(engine, tenant)
    wrong = []
    for user in users:
        live = [content for content, is_live in found[user] if is_live]
        doubled = [c for c, k in Counter(live).items() if k > 1]
        facts = [c for c in live if "(" not in c]  # episodes are dated in brackets
        newer = any("Berlin" in c for c in facts) and not any("lives in Lisbon" in c for c in facts)
        if doubled or len(live) != LIVE_PER_USER or not newer:
            wrong.append((user, sorted(live)))
    assert not wrong, f"{len(wrong)} of {USERS} users wrong: {wrong[:3]}"
