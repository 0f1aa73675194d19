"""A forget lasts: nothing a user said before it comes back through a full replay of the input
topics, a retry, a redrive or a session in flight, and what the user says after it is kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.clients import producer
from memstream.broker.groups import caught_up
from memstream.broker.topics import ensure_topics, publish
from memstream.changes.relay import ChangeRelay
from memstream.events.deadletter import SourceRecord
from memstream.history import HistoryWriter
from memstream.providers.router import ProviderRouter
from memstream.settings import Settings
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.rebuilds import CacheRebuilds
from memstream.store.schema import conversation_message, long_term_memory, user_forget
from tests.fakes.llm import Reply, Script
from tests.support.api import client_for
from tests.support.kafka import chain_idle, message, read_topic
from tests.support.processes import run_cli, worker_metric
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def said(
    tenant: str, user: str, conversation: str, lines: list[str], start: int = 0
) -> list[dict[str, Any]]:
    """A conversation of ``user``'s: each line, and the assistant's acknowledgement."""
    events = []
    for i, line in enumerate(lines):
        n = start + 2 * i
        for offset, role, content in ((0, "user", line), (1, "assistant", "Noted.")):
            events.append(
                message(tenant, conversation, n + offset, role=role, content=content, user_id=user)
            )
    return events


def ended(tenant: str, user: str, conversation: str) -> dict[str, Any]:
    return {
        "event_id": f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": user,
        "agent_id": "agent-1",
        "conversation_id": conversation,
    }


async def memories(engine: AsyncEngine, tenant: str, user: str) -> list[str]:
    """The texts of the user's live memories."""
    t = long_term_memory.c
    query = select(t.content).where(
        t.tenant_id == tenant, t.user_id == user, t.deleted_at.is_(None)
    )
    async with engine.connect() as conn:
        return sorted((await conn.execute(query)).scalars())


async def messages(engine: AsyncEngine, tenant: str, user: str) -> list[str]:
    """The event ids of the user's stored messages."""
    t = conversation_message.c
    query = select(t.event_id).where(t.tenant_id == tenant, t.user_id == user)
    async with engine.connect() as conn:
        return sorted((await conn.execute(query)).scalars())


async def remembered(engine: AsyncEngine, tenant: str, user: str, word: str) -> None:
    async def found() -> bool:
        return any(word in text.lower() for text in await memories(engine, tenant, user))

    await eventually(found, within=90, what=f"{user}'s memory of {word!r}")


async def forget(api: httpx.AsyncClient, tenant: str, user: str, purge: bool) -> None:
    params: dict[str, Any] = {"tenant_id": tenant, "purge_history": purge}
    answer = await api.delete(f"/v1/users/{user}/memories", params=params)
    assert answer.status_code == 200, answer.text


async def configure(api: httpx.AsyncClient, tenant: str, provider: str) -> None:
    body = {"long_memory_provider": provider, "model_target_id": "model-1"}
    answer = await api.put(f"/v1/agents/agent-1/config?tenant_id={tenant}", json=body)
    assert answer.status_code == 200, answer.text


def replayed(settings: Settings, topic: str) -> bool:
    """Rewind the stopped worker's groups on ``topic`` (False while they still have members)."""
    done = run_cli(settings, "replay", "--topic", topic, "--to", "earliest")
    assert done.returncode in (0, 2), done.stderr
    return done.returncode == 0


async def test_a_full_replay_of_both_topics_brings_nothing_of_a_forgotten_user_back(
    settings: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    worker = start_worker(settings)
    before = said(tenant, "u1", "c1", ["I live in Lisbon.", "I am vegetarian."])
    other = said(tenant, "u2", "c2", ["I live in Porto."])
    await publish(settings, "message-written", before + other)
    await publish(settings, "session-ended", [ended(tenant, "u1", "c1"), ended(tenant, "u2", "c2")])
    await remembered(engine, tenant, "u1", "lisbon")
    await remembered(engine, tenant, "u2", "porto")

    async with client_for(settings) as api:
        await forget(api, tenant, "u1", purge=True)
    assert await messages(engine, tenant, "u1") == []
    assert await memories(engine, tenant, "u1") == []

    after = said(tenant, "u1", "c3", ["I keep bees."])
    await publish(settings, "message-written", after)
    await publish(settings, "session-ended", [ended(tenant, "u1", "c3")])
    await remembered(engine, tenant, "u1", "bees")

    async def idle() -> bool:
        return await caught_up(settings, "message-written") and await chain_idle(settings)

    await eventually(idle, within=60, what="the worker through every topic")
    worker.stop()

    async def rewound() -> bool:
        return replayed(settings, "message-written") and replayed(settings, "session-ended")

    await eventually(rewound, within=60, what="both topics rewound to their start")
    assert not await caught_up(settings, "message-written")
    start_worker(settings, "again")
    await eventually(idle, within=90, what="the replay through every stage")

    # What u1 said before the forget stays out; what u1 said after, and u2, are kept.
    assert await messages(engine, tenant, "u1") == [e["event_id"] for e in after]
    kept = " ".join(await memories(engine, tenant, "u1")).lower()
    assert "bees" in kept and "lisbon" not in kept and "vegetarian" not in kept
    assert await messages(engine, tenant, "u2") == sorted(e["event_id"] for e in other)
    assert any("porto" in text.lower() for text in await memories(engine, tenant, "u2"))
    port = settings.worker_web_port
    dropped = await worker_metric(port, "memstream_events_total", outcome="dropped_forgotten")
    assert dropped >= len(before) + 1  # the messages, and the session end


async def test_a_session_waiting_in_a_retry_tier_at_the_forget_writes_nothing(
    services: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    settings = isolated_settings(
        retry_base_seconds=0.5,
        retry_max_delay_seconds=1.0,
        retry_horizon_seconds=120.0,
        agent_config_cache_seconds=0,
    )
    async with client_for(settings) as api:
        # MemOS is not set up: the conflict stage's write fails and waits in the retry tiers.
        await configure(api, tenant, "MEMOS")
        start_worker(settings)
        await publish(settings, "message-written", said(tenant, "u1", "c1", ["I live in Lisbon."]))
        await publish(settings, "session-ended", [ended(tenant, "u1", "c1")])

        async def retrying() -> bool:
            port = settings.worker_web_port
            try:
                return await worker_metric(port, "memstream_retries_total", stage="conflict") > 0
            except httpx.HTTPError:
                return False  # the worker is not answering yet

        await eventually(retrying, within=90, what="the session in the retry tiers")
        await configure(api, tenant, "MYSQL")  # the next try would write
        await forget(api, tenant, "u1", purge=False)

        # The user's sessions are applied in order: once the later one is in, the earlier
        # was handled, and dropped.
        await publish(settings, "message-written", said(tenant, "u1", "c2", ["I keep goats."]))
        await publish(settings, "session-ended", [ended(tenant, "u1", "c2")])
        await remembered(engine, tenant, "u1", "goats")
    kept = " ".join(await memories(engine, tenant, "u1")).lower()
    assert "lisbon" not in kept
    # The forget kept the history it was not asked to purge.
    assert len(await messages(engine, tenant, "u1")) == 4


async def test_a_redrive_after_the_forget_sends_nothing_of_the_user_back(
    services: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    settings = isolated_settings(
        retry_base_seconds=0.2,
        retry_max_delay_seconds=0.4,
        retry_horizon_seconds=5.0,
        agent_config_cache_seconds=0,
        max_content_chars=40,
    )
    long_line = "I live in Lisbon, near the river, with two cats."  # over 40 characters
    async with client_for(settings) as api:
        await configure(api, tenant, "MEMOS")
        start_worker(settings)
        events = said(tenant, "u1", "c1", ["I am vegetarian.", long_line])
        await publish(settings, "message-written", events)
        await publish(settings, "session-ended", [ended(tenant, "u1", "c1")])

        async def letters() -> bool:
            found = [value["reason"] for _, value in await read_topic(settings, "dead-letter")]
            return sorted(found) == ["content_too_large", "retries_exhausted"]

        await eventually(letters, within=90, what="the message and the session dead-lettered")
        await configure(api, tenant, "MYSQL")
        await forget(api, tenant, "u1", purge=True)

    # Neither letter goes back: the message (too long for this worker, not for every one) and
    # the session would bring u1's words back.
    sent = run_cli(settings, "redrive")
    assert sent.returncode == 0, sent.stderr
    assert "forgotten after they were sent: 2" in sent.stdout, sent.stdout
    await publish(settings, "message-written", said(tenant, "u1", "c2", ["I keep goats."]))
    await publish(settings, "session-ended", [ended(tenant, "u1", "c2")])
    await remembered(engine, tenant, "u1", "goats")
    kept = " ".join(await memories(engine, tenant, "u1")).lower()
    assert "vegetarian" not in kept and "lisbon" not in kept
    assert await messages(engine, tenant, "u1") == ["c2-0", "c2-1"]


async def test_a_forget_is_recorded_with_the_ends_of_the_input_topics(
    settings: Settings, tenant: str, engine: AsyncEngine
) -> None:
    await publish(settings, "message-written", said(tenant, "u1", "c1", ["Hello."]))
    async with client_for(settings) as api:
        await forget(api, tenant, "u1", purge=True)
    f = user_forget.c
    query = select(f.offsets, f.purge_history).where(f.tenant_id == tenant, f.user_id == "u1")
    async with engine.connect() as conn:
        (offsets, purge), *more = (await conn.execute(query)).all()
    assert not more and purge
    history = offsets[settings.topic("message-written")]
    assert sum(history.values()) == 2  # every message published before the forget
    assert sorted(map(int, history)) == list(range(settings.topic_partitions))
    assert sorted(map(int, offsets[settings.topic("session-ended")])) == list(
        range(settings.topic_partitions)
    )


async def test_a_session_the_judge_holds_at_the_forget_writes_nothing(
    services: Settings,
    tenant: str,
    engine: AsyncEngine,
    start_worker: Any,
    llm_server: tuple[str, Script],
) -> None:
    url, script = llm_server
    script.reset()
    # The model takes its time with the first session, then fails: the rules judge it.
    script.replies.append(Reply(status=500, delay=8.0))
    settings = isolated_settings(llm_base_url=url, llm_model="m", agent_config_cache_seconds=0)
    start_worker(settings)
    await publish(settings, "message-written", said(tenant, "u1", "c1", ["I live in Lisbon."]))
    await publish(settings, "session-ended", [ended(tenant, "u1", "c1")])

    async def judging() -> bool:
        asked = [m.get("content", "") for r in list(script.requests) for m in r["messages"]]
        return any("Lisbon" in text for text in asked)

    await eventually(judging, within=90, what="the judge asking the model about the session")
    async with client_for(settings) as api:
        await forget(api, tenant, "u1", purge=True)
    await publish(settings, "message-written", said(tenant, "u1", "c2", ["I keep goats."]))
    await publish(settings, "session-ended", [ended(tenant, "u1", "c2")])
    await remembered(engine, tenant, "u1", "goats")
    assert "lisbon" not in " ".join(await memories(engine, tenant, "u1")).lower()
    assert await messages(engine, tenant, "u1") == ["c2-0", "c2-1"]


def batch(tenant: str, topic: str, users: list[str]) -> list[SourceRecord]:
    """One message of each of ``users`` (conversation ``c-<user>``), at offsets 0, 1, ..."""
    return [
        SourceRecord(topic, 0, n, None, b"c", orjson.dumps(message(tenant, f"c-{u}", n, user_id=u)))
        for n, u in enumerate(users)
    ]


async def no_dead_letters(letters: object) -> None:
    raise AssertionError(f"no dead letter expected: {letters!r}")


async def test_a_history_batch_a_forget_overtakes_is_taken_back(
    settings: Settings, tenant: str, engine: AsyncEngine
) -> None:
    topic = settings.topic("message-written")
    forgets = ForgetStore(engine)

    class Overtaken(MessageStore):
        """The record, with a forget of u1 that begins while the batch is on its way in."""

        async def insert_many(self, messages: Sequence[StoredMessage]) -> None:
            await forgets.record(tenant, "u1", {topic: {0: 2}}, purge=True)
            await super().insert_many(messages)

    writer = HistoryWriter(
        Overtaken(engine),
        None,
        no_dead_letters,
        rebuilds=CacheRebuilds(engine),
        max_content_chars=1000,
        forgets=ForgetSet(forgets),
    )
    await writer.process(batch(tenant, topic, ["u1", "u2", "u3"]))
    assert await messages(engine, tenant, "u1") == []  # taken back once in
    assert await messages(engine, tenant, "u2") == ["c-u2-1"]

    # Sent again (a redelivery), the forget is known first: u1's message is never written.
    plain = HistoryWriter(
        MessageStore(engine),
        None,
        no_dead_letters,
        rebuilds=CacheRebuilds(engine),
        max_content_chars=1000,
        forgets=ForgetSet(forgets),
    )
    dropped = await plain.process(batch(tenant, topic, ["u1", "u2"]))
    assert dropped.forgotten == 1 and len(dropped.accepted) == 1
    assert await messages(engine, tenant, "u1") == []
    # What u1 says after the forget (past the partition's end then) is stored.
    later = batch(tenant, topic, ["u2", "u3", "u1"])
    assert (await plain.process(later)).forgotten == 0
    assert await messages(engine, tenant, "u1") == ["c-u1-2"]


async def test_the_relay_sends_a_change_recorded_before_a_forget_without_its_text(
    settings: Settings, tenant: str, engine: AsyncEngine
) -> None:
    body = {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": None,
        "cube_id": "user_profile",
        "memory_type": "text_mem",
        "content": "The user sails.",
    }
    async with client_for(settings) as api:
        assert (await api.post("/v1/memories", json=body)).status_code == 201
        assert (await api.post("/v1/memories", json={**body, "user_id": "u2"})).status_code == 201
    # The forget has begun (recorded) but not reached the outbox yet, as when the relay read
    # the rows a moment before: the text must not go out all the same.
    await ForgetStore(engine).record(tenant, "u1", {}, purge=False)
    await ensure_topics(settings, ("memory-changed",))
    router = ProviderRouter(engine, settings)
    relay = ChangeRelay(engine, settings, router.changes)
    try:
        async with producer(settings, enable_idempotence=True) as client:
            while await relay.tick(client):
                pass
    finally:
        await router.close()
    published = [
        value for _, value in await read_topic(settings, "memory-changed")
        if value["tenant_id"] == tenant
    ]  # fmt: skip
    assert sorted((c["user_id"], c.get("content")) for c in published) == [
        ("u1", ""),
        ("u2", "The user sails."),
    ]
