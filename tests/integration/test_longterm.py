"""The long-term chain and summaries end to end: Kafka in, memories and summaries out."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from memstream.broker.groups import caught_up
from memstream.broker.topics import publish
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.messages import MessageStore
from memstream.store.schema import conversation_summary, long_term_memory
from memstream.store.summaries import SummaryStore
from tests.support.api import client_for
from tests.support.faults import proxied_database
from tests.support.kafka import message, read_topic
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def said(tenant: str, conversation: str, lines: list[str], start: int = 0) -> list[dict[str, Any]]:
    """A conversation in which the user says ``lines`` and the assistant acknowledges."""
    events = []
    for i, line in enumerate(lines):
        n = start + 2 * i
        events.append(message(tenant, conversation, n, role="user", content=line))
        events.append(message(tenant, conversation, n + 1, role="assistant", content="Noted."))
    return events


def ended(
    tenant: str, conversation: str, event_id: str = "", agent: str = "agent-1"
) -> dict[str, Any]:
    return {
        "event_id": event_id or f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": agent,
        "conversation_id": conversation,
    }


async def live(engine, tenant: str, kind: str | None = None) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    query = select(long_term_memory.c.cube_id, long_term_memory.c.content).where(
        long_term_memory.c.tenant_id == tenant, long_term_memory.c.deleted_at.is_(None)
    )
    if kind is not None:
        query = query.where(long_term_memory.c.kind == kind)
    async with engine.connect() as conn:
        return sorted((r.cube_id, r.content) for r in (await conn.execute(query)).all())


async def memories_settle(engine, tenant: str, at_least: int = 1) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    async def some() -> bool:
        return len(await live(engine, tenant)) >= at_least

    await eventually(some, within=90, what="long-term memories")
    return await live(engine, tenant)


async def test_a_session_end_turns_facts_into_memories_for_the_next_session(
    settings: Settings, tenant, engine, start_worker
):
    start_worker(settings)
    await publish(
        settings,
        "message-written",
        said(
            tenant,
            "s1",
            [
                "Hi there!",
                "I am vegetarian and I love spicy food.",
                "I live in Lisbon.",
                "Please always answer in short bullet points.",
            ],
        ),
    )
    await publish(settings, "session-ended", [ended(tenant, "s1")])
    memories = await memories_settle(engine, tenant, at_least=3)
    texts = " ".join(content for _, content in memories).lower()
    assert "vegetarian" in texts and "lisbon" in texts
    assert any(cube == "agent_agent-1" and "bullet" in c.lower() for cube, c in memories)
    assert not any("hi there" in c.lower() for _, c in memories)

    provider = BuiltinProvider(engine)
    stored = await provider.list_live(tenant, "user-1", "agent-1")
    assert all(item.source_event_ids for item in stored)
    assert all(e.startswith("s1-") for item in stored for e in item.source_event_ids)

    # The next session's load path finds them.
    async with client_for(settings) as api:
        await api.put(
            f"/v1/agents/agent-1/config?tenant_id={tenant}",
            json={"open_long_memory": True, "model_target_id": "model-1"},
        )
        body = (
            await api.post(
                "/v1/context",
                json={
                    "tenant_id": tenant,
                    "user_id": "user-1",
                    "agent_id": "agent-1",
                    "conversation_id": "s2",
                    "query": "Any vegetarian restaurant ideas in Lisbon?",
                },
            )
        ).json()
    assert "vegetarian" in body["long_term"]["user_profile"].lower()
    assert body["tokens"]["user_profile"] > 0


async def test_doubled_and_replayed_session_ends_never_duplicate(
    settings, tenant, engine, start_worker
):
    start_worker(settings)
    await publish(settings, "message-written", said(tenant, "d1", ["I work as a nurse in Oslo."]))
    end = ended(tenant, "d1")
    await publish(settings, "session-ended", [end, end, {**end, "event_id": "another-end"}])
    first = await memories_settle(engine, tenant)
    # Two sessions of the same user stating the same fact end together.
    await publish(settings, "message-written", said(tenant, "d2", ["I work as a nurse in Oslo."]))
    await publish(settings, "session-ended", [ended(tenant, "d2"), ended(tenant, "d2")])
    await eventually(lambda: _judged(settings, 2), within=60, what="the second session judged")
    assert await live(engine, tenant) == first


async def _judged(settings: Settings, sessions: int) -> bool:
    records = await read_topic(settings, "lt-judge")
    return len({r["session"]["conversation_id"] for _, r in records}) >= sessions


async def test_an_updated_fact_expires_the_old_one(settings, tenant, engine, start_worker):
    start_worker(settings)
    await publish(settings, "message-written", said(tenant, "u1", ["I live in Paris."]))
    await publish(settings, "session-ended", [ended(tenant, "u1")])
    before = await memories_settle(engine, tenant)
    assert any("paris" in c.lower() for _, c in before)

    await publish(
        settings, "message-written", said(tenant, "u2", ["I moved from Paris to Berlin."])
    )
    await publish(settings, "session-ended", [ended(tenant, "u2")])

    async def moved() -> bool:
        facts = await live(engine, tenant, kind="fact")
        now = " ".join(c.lower() for _, c in facts)
        return "berlin" in now and not any(
            "paris" in c.lower() and "berlin" not in c.lower() for _, c in facts
        )

    await eventually(moved, within=90, what="Berlin stored and the Paris fact expired")
    # What the user said stays on record as an episode: it records the day, not a current fact.
    episodes = [c for _, c in await live(engine, tenant, kind="episode")]
    assert any(c.endswith("I live in Paris.") for c in episodes), episodes


async def test_episodes_keep_what_was_said_dated_and_once(settings, tenant, engine, start_worker):
    start_worker(settings)
    events = [
        message(tenant, "ep1", 0, role="user", content="I adopted a puppy called Bruno yesterday."),
        message(tenant, "ep1", 1, role="assistant", content="Congratulations! Which breed?"),
        message(tenant, "ep1", 2, role="user", content="A beagle."),
        message(tenant, "ep1", 3, role="user", content="Thanks!"),
    ]
    events[0]["metadata"] = {"speaker": "Ana"}
    await publish(settings, "message-written", events)
    await publish(settings, "session-ended", [ended(tenant, "ep1")])

    async def episodes() -> list[Any]:
        stored = await BuiltinProvider(engine).list_live(tenant, "user-1", "agent-1")
        return [m for m in stored if m.kind == "episode"]

    async def both() -> bool:
        return len(await episodes()) >= 2

    await eventually(both, within=90, what="two episodes")
    kept = sorted(await episodes(), key=lambda m: m.source_event_ids)
    said_on = events[0]["created_at"][:10]
    assert all(m.occurred_at is not None for m in kept)
    assert all(m.occurred_at.date().isoformat() == said_on for m in kept)  # type: ignore[union-attr]
    puppy, beagle = kept
    assert puppy.content.startswith("Ana (") and "puppy called Bruno on" in puppy.content
    assert "yesterday" not in puppy.content
    assert puppy.source_event_ids == (events[0]["event_id"],)
    assert 'asked "Congratulations! Which breed?", answered: A beagle.' in beagle.content
    assert beagle.source_event_ids == (events[1]["event_id"], events[2]["event_id"])
    assert not any("Thanks" in m.content for m in kept)

    # The same words on the same day in another session are the same episode: kept once. The
    # session's new line is planned after it, so once that is stored the verdict is in.
    again = [
        {**events[0], "event_id": "ep2-0", "conversation_id": "ep2"},
        message(tenant, "ep2", 1, role="user", content="I also play the violin on Sundays."),
    ]
    await publish(settings, "message-written", again)
    await publish(settings, "session-ended", [ended(tenant, "ep1", event_id="replayed-end")])
    await publish(settings, "session-ended", [ended(tenant, "ep2")])

    async def violin() -> bool:
        return any("violin" in m.content for m in await episodes())

    await eventually(violin, within=90, what="the second session's episode")
    assert sum("puppy" in m.content for m in await episodes()) == 1


async def test_an_unavailable_provider_is_retried_then_dead_lettered(
    services, tenant, engine, start_worker
):
    settings = isolated_settings(
        retry_base_seconds=0.2, retry_max_delay_seconds=0.4, retry_horizon_seconds=1.0
    )
    async with client_for(settings) as api:
        await api.put(
            f"/v1/agents/agent-1/config?tenant_id={tenant}",
            json={"long_memory_provider": "MEMOS", "model_target_id": "m"},
        )
    start_worker(settings)
    await publish(settings, "message-written", said(tenant, "p1", ["I have two cats."]))
    await publish(settings, "session-ended", [ended(tenant, "p1")])

    async def exhausted() -> bool:
        return any(
            v["reason"] == "retries_exhausted" for _, v in await read_topic(settings, "dead-letter")
        )

    await eventually(exhausted, within=60, what="retries_exhausted in dead-letter")
    (letter,) = [v for _, v in await read_topic(settings, "dead-letter")]
    assert letter["stage"] in ("conflict", "persist")
    assert "cats" in letter["payload"]
    # Tried again through the retry tiers until it had been failing for the horizon.
    tiers = [f"retry-{tier}" for tier in (1, 2)]
    waited = [record for tier in tiers for _, record in await read_topic(settings, tier)]
    assert len(waited) >= 2 and {r["stage"] for r in waited} == {letter["stage"]}
    assert f"failed {len(waited) + 1} times" in letter["detail"]
    assert await live(engine, tenant) == []


async def test_the_database_down_during_a_session_end_loses_nothing(
    services, tenant, engine, start_worker
):
    proxy, settings = await proxied_database(services, db_retry_max_seconds=1.0)
    try:
        start_worker(settings)
        await publish(settings, "message-written", said(tenant, "o1", ["My sister is Ana."]))

        async def stored() -> bool:
            return await MessageStore(engine).count(tenant) == 2

        await eventually(stored, what="messages stored")
        await proxy.stop()
        await publish(settings, "session-ended", [ended(tenant, "o1")])

        async def tried() -> bool:
            # The session stage met the outage: the session end waits on a retry tier.
            return any(r["stage"] == "session" for _, r in await read_topic(settings, "retry-1"))

        await eventually(tried, what="the session end tried during the outage")
        assert await live(engine, tenant) == []
        await proxy.start()
        memories = await memories_settle(engine, tenant)
        assert any("ana" in c.lower() for _, c in memories)
    finally:
        await proxy.stop()


async def test_summaries_start_after_twenty_uncovered_messages(
    settings, tenant, engine, start_worker
):
    start_worker(settings)
    lines = [f"Question {i} about planning the Lisbon trip budget and hotels." for i in range(9)]
    await publish(settings, "message-written", said(tenant, "long", lines))  # 18 messages

    summaries = SummaryStore(engine)

    async def looked_at() -> bool:
        # Every message stored and committed, then every summary check the history stage
        # sent for them settled: the summary stage has seen the 18 messages.
        return (
            await MessageStore(engine).count(tenant) == 18
            and await caught_up(settings, "message-written")
            and await caught_up(settings, "summary-check")
        )

    await eventually(looked_at, what="the summary stage past the 18 messages")
    assert await summaries.get(tenant, "long") is None

    await publish(settings, "message-written", said(tenant, "long", lines[:2], start=18))

    async def written() -> bool:
        return await summaries.get(tenant, "long") is not None

    await eventually(written, within=60, what="the conversation summary")
    summary = await summaries.get(tenant, "long")
    assert summary is not None and 0 < summary.token_count <= 2000
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(conversation_summary.c.covered_messages).where(
                    conversation_summary.c.tenant_id == tenant
                )
            )
        ).one()
    assert row.covered_messages == 22
