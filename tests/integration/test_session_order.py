"""A user's sessions through the whole long-term chain are applied in the order they ended: one
that waits on a retry tier before the conflict stage holds the user's later sessions back (and
no other user's), one dead-lettered on its way holds nothing back, and with split stage roles
while workers are killed, added and stopped every user's first session is applied before the
second, with the newer of two contradicting facts live and no memory lost or stored twice."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import readiness
from memstream.broker.clients import admin_client
from memstream.broker.groups import live_members
from memstream.broker.topics import ensure_topics, publish
from memstream.failure.tiers import RetryRecord
from memstream.settings import Settings
from memstream.store.schema import conversation_message, long_term_memory
from memstream.topology import PUBLIC_TOPICS, internal_topics
from tests.support.faults import proxied_database
from tests.support.kafka import read_topic
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

USERS = 30
FIRST = ("I live in Lisbon with my partner.", "I am allergic to peanuts.", "I play tennis.")
SECOND = ("I moved from Lisbon to Berlin last month.",)
# Three facts and an episode per statement; Lisbon expired by Berlin: seven live. Persisting
# writes the new memories first and then expires the old, so a user passes through eight live
# on the way: only seven says that both sessions are applied in full.
LIVE_PER_USER = 7


def session(
    tenant: str, user: str, n: int, said: tuple[str, ...], agent: str = "agent-1"
) -> list[dict[str, Any]]:
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
                    "agent_id": agent,
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


@dataclass(frozen=True)
class Stored:
    """A memory as stored: what it says, whether it is live, when and from which session."""

    content: str
    live: bool
    created_at: datetime
    session: int  # n of the user's n-th session, from the messages it came from


async def memories(engine: AsyncEngine, tenant: str) -> dict[str, list[Stored]]:
    """Every memory of the tenant, by user, in the order they were stored."""
    t = long_term_memory
    query = (
        select(t.c.user_id, t.c.content, t.c.deleted_at, t.c.created_at, t.c.source_event_ids)
        .where(t.c.tenant_id == tenant)
        .order_by(t.c.created_at, t.c.id)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    out: dict[str, list[Stored]] = {}
    for row in rows:
        # Event ids are "<user>-s<n>-<k>": every source of a memory is of one session.
        [n] = {int(event.rsplit("-", 2)[1][1:]) for event in row.source_event_ids}
        stored = Stored(row.content, row.deleted_at is None, row.created_at, n)
        out.setdefault(row.user_id, []).append(stored)
    return out


def out_of_order(stored: list[Stored]) -> bool:
    """Whether a memory of a later session was stored before one of an earlier session."""
    sessions = [m.session for m in stored]
    return sessions != sorted(sessions)


def applied_in_order(stored: list[Stored]) -> bool:
    """Session 1 applied, then session 2: Lisbon was stored, then expired by Berlin."""
    facts = {m.content: m.live for m in stored if "(" not in m.content}  # episodes are dated
    lisbon = [live for content, live in facts.items() if "lives in Lisbon" in content]
    berlin = [live for content, live in facts.items() if "Berlin" in content]
    return not out_of_order(stored) and lisbon == [False] and berlin == [True]


async def stored_messages(engine: AsyncEngine, tenant: str) -> int:
    query = select(func.count()).where(conversation_message.c.tenant_id == tenant)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def waiting_on_a_tier(settings: Settings, stage: str) -> bool:
    """Whether a record of ``stage`` went to the first retry tier."""
    return any(
        RetryRecord.decode(orjson.dumps(v)).stage == stage
        for _, v in await read_topic(settings, "retry-1")
    )


async def test_a_session_waiting_on_a_retry_tier_is_applied_before_the_users_next(
    services, tenant, engine, start_worker
):
    """The database is down when the session stage reads session 1: it waits on a retry tier
    (longer than the chain takes) while session 2 and another user's session go all the way
    at once. Session 2 waits in the conflict stage for session 1; the other user does not."""
    proxy, settings = await proxied_database(
        services,
        topic_partitions=2,
        retry_base_seconds=30.0,
        retry_max_delay_seconds=30.0,
        retry_horizon_seconds=300,
    )
    try:
        await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
        start_worker(settings)
        sessions = [("u1", 1, FIRST), ("u1", 2, SECOND), ("u2", 1, FIRST)]
        messages = [e for u, n, said in sessions for e in session(tenant, u, n, said)]
        await publish(settings, "message-written", messages)

        async def history_stored() -> bool:
            return await stored_messages(engine, tenant) == len(messages)

        await eventually(history_stored, within=90, what="every message stored")
        await proxy.stop()
        await publish(settings, "session-ended", [ended(tenant, "u1", 1)])

        async def first_waits() -> bool:
            return await waiting_on_a_tier(settings, "session")

        await eventually(first_waits, within=60, what="session 1 on a retry tier")
        await proxy.start()
        await publish(settings, "session-ended", [ended(tenant, "u1", 2), ended(tenant, "u2", 1)])

        async def other_user_applied() -> bool:
            found = await memories(engine, tenant)
            return sum(m.live for m in found.get("u2", [])) == 6  # three facts, three episodes

        await eventually(other_user_applied, within=60, what="the other user's session applied")
        # Session 2 went through the chain as quickly, and waits for session 1 in the
        # conflict stage, which is still on its tier.
        assert "u1" not in await memories(engine, tenant)

        async def both_applied() -> bool:
            found = await memories(engine, tenant)
            return sum(m.live for m in found.get("u1", [])) == LIVE_PER_USER

        await eventually(both_applied, within=90, what="both sessions of u1 applied")
        stored = (await memories(engine, tenant))["u1"]
        assert applied_in_order(stored), stored
        assert sum(m.live for m in stored) == LIVE_PER_USER
    finally:
        await proxy.stop()


async def test_a_session_dead_lettered_on_its_way_releases_the_users_next(
    services, tenant, engine, start_worker
):
    """The broker refuses session 1's record to the judge (larger than that topic takes): the
    session stage dead-letters it, and the user's session 2 is applied at once, not after the
    retry horizon its placeholder would otherwise have held it for."""
    settings = isolated_settings(topic_partitions=1, retry_horizon_seconds=600)
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    limit = ConfigResource(
        ConfigResourceType.TOPIC, settings.topic("lt-judge"), configs={"max.message.bytes": "4000"}
    )
    async with admin_client(settings) as admin:
        await admin.alter_configs([limit])
    start_worker(settings)
    long = ("I live in Lisbon with my partner. " + "We walk by the river every day. " * 200,)
    await publish(settings, "message-written", session(tenant, "u1", 1, long))
    await publish(settings, "session-ended", [ended(tenant, "u1", 1)])

    async def dead_lettered() -> bool:
        letters = [v for _, v in await read_topic(settings, "dead-letter")]
        return any(letter["stage"] == "session" for letter in letters)

    await eventually(dead_lettered, within=60, what="session 1 dead-lettered")
    await publish(settings, "message-written", session(tenant, "u1", 2, SECOND))
    await publish(settings, "session-ended", [ended(tenant, "u1", 2)])

    async def second_applied() -> bool:
        found = await memories(engine, tenant)
        return any("Berlin" in m.content for m in found.get("u1", []))

    await eventually(second_applied, within=60, what="session 2 applied")
    assert {m.session for m in (await memories(engine, tenant))["u1"]} == {2}


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
        return all(sum(m.live for m in found.get(u, [])) == LIVE_PER_USER for u in users)

    # A user that never settles is named by the checks below, with what it holds.
    with contextlib.suppress(TimeoutError):
        await eventually(settled, within=120, what="both sessions of every user applied")
    found = await memories(engine, tenant)
    wrong = []
    for user in users:
        live = [m.content for m in found[user] if m.live]
        doubled = [c for c, k in Counter(live).items() if k > 1]
        # In order: every memory of session 1 stored before those of session 2, and the
        # Lisbon fact stored, then expired by the Berlin one (applied first, session 2
        # would have left nothing for session 1's older fact to supersede).
        if doubled or len(live) != LIVE_PER_USER or not applied_in_order(found[user]):
            wrong.append((user, found[user]))
    assert not wrong, f"{len(wrong)} of {USERS} users wrong: {wrong[:3]}"
