"""Sessions of one user are applied to long-term memory in the order they arrived, even when
the first meets an outage and waits on a retry tier while the second is already there."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import ensure_topics, publish
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import Session, dumps
from memstream.memory import USER_PROFILE
from memstream.providers.memos import memos_cube
from memstream.roles import ROLES, group_id
from memstream.settings import Settings
from memstream.store.schema import long_term_memory
from memstream.topology import PUBLIC_TOPICS, internal_topics, tier_topics
from tests.fakes.memos import MEMOS_KEY, MemOSState
from tests.support.api import client_for
from tests.support.faults import proxied_database
from tests.support.kafka import committed_to_end, read_topic, retry_group
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def session_said(tenant: str, conversation: str, fact: str, agent: str = "agent-1") -> bytes:
    """The ``lt-conflict`` record of a session in which the user stated ``fact``."""
    session = Session(tenant, "user-1", agent, conversation, f"end-{conversation}")
    candidate = Candidate(fact, "text_mem", "user", 7, "personal_fact", (f"{conversation}-0",))
    return dumps(session=session, candidates=[candidate])


async def memories(engine: AsyncEngine, tenant: str) -> dict[str, bool]:
    """Every memory of the tenant's user in the built-in store: content -> live."""
    query = select(long_term_memory.c.content, long_term_memory.c.deleted_at).where(
        long_term_memory.c.tenant_id == tenant
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {row.content: row.deleted_at is None for row in rows}


async def retried(settings: Settings, *, or_else: Callable[[], bool] = lambda: False) -> None:
    """Wait until a record waits on the first retry tier (or ``or_else`` holds)."""

    async def waiting() -> bool:
        return or_else() or bool(await read_topic(settings, "retry-1"))

    await eventually(waiting, within=60, what="the first try's failure")


async def test_the_newer_session_wins_when_the_older_waited_out_an_outage(
    services, tenant, engine, start_worker
):
    proxy, settings = await proxied_database(
        services,
        topic_partitions=1,
        retry_base_seconds=2.0,
        retry_max_delay_seconds=4.0,
        retry_horizon_seconds=300,
    )
    try:
        await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
        start_worker(settings)
        await proxy.stop()
        await publish(settings, "lt-conflict", [session_said(tenant, "s1", "Lives in Lisbon")])
        await retried(settings)
        # The database is back before the first session's retry is due, and the user's next
        # session, which says otherwise, is there first.
        await proxy.start()
        await publish(settings, "lt-conflict", [session_said(tenant, "s2", "Lives in Berlin")])

        async def settled() -> bool:
            found = await memories(engine, tenant)
            return "Lives in Berlin" in found and "Lives in Lisbon" in found

        await eventually(settled, within=60, what="both sessions applied")

        async def nothing_pending() -> bool:
            # Every retry sent back, then every record of the stage settled: nothing else
            # comes back.
            for topic, group in [
                *((tier, retry_group(settings)) for tier in tier_topics(settings)),
                ("lt-conflict", group_id(settings.app_id, ROLES)),
            ]:
                if not await committed_to_end(settings, topic, group):
                    return False
            return True

        await eventually(nothing_pending, within=60, what="the retry sent back and settled")
        assert await memories(engine, tenant) == {"Lives in Lisbon": False, "Lives in Berlin": True}
    finally:
        await proxy.stop()


async def test_nothing_expires_before_a_provisional_add_is_confirmed(
    services, tenant, start_worker, memos_server: tuple[str, MemOSState]
):
    """MemOS answers a temporary id for the new fact and stores nothing (an add it lost): the
    old fact it supersedes stays until the add is confirmed, on a later try."""
    url, state = memos_server
    state.reset()
    old = state.seed(memos_cube(tenant, "user-1", USER_PROFILE), "Lives in Lisbon")
    settings = isolated_settings(
        topic_partitions=1,
        memos_url=url,
        memos_api_key=MEMOS_KEY,
        retry_base_seconds=1.0,
        retry_max_delay_seconds=2.0,
        retry_horizon_seconds=300,
    )
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    async with client_for(settings) as api:
        answer = await api.put(
            f"/v1/agents/agent-1/config?tenant_id={tenant}",
            json={"long_memory_provider": "MEMOS", "model_target_id": "m"},
        )
        assert answer.status_code == 200, answer.text
    state.add_async = "lost"
    start_worker(settings)
    await publish(settings, "lt-conflict", [session_said(tenant, "s2", "Lives in Berlin")])
    await retried(settings, or_else=lambda: old not in state.memories)
    assert [m["memory"] for m in state.memories.values()] == ["Lives in Lisbon"]
    state.add_async = ""

    async def updated() -> bool:
        return sorted(m["memory"] for m in state.memories.values()) == ["Lives in Berlin"]

    await eventually(updated, within=60, what="the new fact stored, then the old one deleted")
    assert old not in state.memories
