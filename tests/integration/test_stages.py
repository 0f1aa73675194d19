"""Every stage settles every record: finished, retried through the durable retry tiers while an
outage lasts, or dead-lettered with its stage and reason; never acknowledged unfinished."""

from __future__ import annotations

import time
from datetime import datetime
from functools import partial

import httpx
import orjson
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.groups import caught_up
from memstream.broker.topics import ensure_topics, publish
from memstream.failure.tiers import Failing, RetryPolicy, RetryRecord, tier_topic
from memstream.longterm.models import Candidate, SessionMessage
from memstream.longterm.payloads import Session, dumps
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.summaries import SummaryStore
from memstream.topology import PUBLIC_TOPICS, internal_topics
from tests.support.api import client_for
from tests.support.faults import proxied_database
from tests.support.kafka import message, read_topic
from tests.support.processes import worker_metric
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

GARBAGE = [b'{"garbage": 1}', b"\xff not even utf-8"]


def session(
    tenant: str, conversation: str, agent: str = "agent-1", user: str = "user-1"
) -> Session:
    return Session(tenant, user, agent, conversation, f"end-{conversation}")


def judged(tenant: str, conversation: str, text: str) -> bytes:
    """An lt-judge record: a session whose one new user message says ``text``."""
    said = SessionMessage(f"{conversation}-0", "user", text, True, datetime(2026, 1, 1))
    return dumps(session=session(tenant, conversation), messages=[said])


def proposed(
    tenant: str, conversation: str, text: str, agent: str = "agent-1", user: str = "user-1"
) -> bytes:
    """An lt-dedupe or lt-conflict record: one candidate memory of the user."""
    candidate = Candidate(text, "text_mem", "user", 7, "personal_fact", (f"{conversation}-0",))
    return dumps(session=session(tenant, conversation, agent, user), candidates=[candidate])


def planned(tenant: str, conversation: str, text: str) -> bytes:
    """An lt-persist record: one memory to store, none to expire."""
    memory = NewMemory(
        tenant, "user-1", "agent-1", USER_PROFILE, "text_mem", text, 7, (f"{conversation}-0",)
    )
    return dumps(session=session(tenant, conversation), store=[memory], expire=[])


async def memories(engine: AsyncEngine, tenant: str, user: str = "user-1") -> str:
    items = await BuiltinProvider(engine).list_live(tenant, user, "agent-1")
    return " | ".join(sorted(item.content.lower() for item in items))


async def remembered(engine: AsyncEngine, tenant: str, *words: str, within: float = 60) -> None:
    async def all_there() -> bool:
        known = await memories(engine, tenant)
        return all(word in known for word in words)

    await eventually(all_there, within=within, what=f"memories with {', '.join(words)}")


async def letters(settings: Settings) -> list[dict[str, object]]:
    return [value for _, value in await read_topic(settings, "dead-letter")]


async def metric(settings: Settings, name: str, **labels: str) -> float:
    return await worker_metric(settings.worker_web_port, name, **labels)


async def all_topics(settings: Settings) -> None:
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))


async def waiting(settings: Settings, word: str) -> list[RetryRecord]:
    """The records on the retry tiers (each a failed try) whose payload mentions ``word``."""
    policy = RetryPolicy.from_settings(settings)
    found = []
    for tier in range(1, policy.tiers + 1):
        for _, value in await read_topic(settings, tier_topic(tier)):
            record = RetryRecord.decode(orjson.dumps(value))
            if word.encode() in (record.value or b""):
                found.append(record)
    return found


def failed_at(settings: Settings, record: RetryRecord) -> float:
    """When the try that put ``record`` on its tier failed."""
    policy = RetryPolicy.from_settings(settings)
    return record.not_before - policy.delay(policy.tier_of(record.failing.attempts))


async def test_garbage_on_every_internal_topic_is_dead_lettered_and_each_stage_goes_on(
    services, tenant, engine, start_worker
):
    # One partition: the good record of each topic sits right behind its garbage.
    settings = isolated_settings(topic_partitions=1)
    await all_topics(settings)
    retry = RetryRecord(
        "persist",
        settings.topic("lt-persist"),
        b"k",
        planned(tenant, "r", "I ride a unicycle"),
        Failing(1, time.time()),
        time.time(),
        "ConnectionRefusedError()",
    )
    good = {
        "lt-judge": judged(tenant, "j", "I am allergic to peanuts."),
        "lt-dedupe": proposed(tenant, "d", "The user plays the cello"),
        "lt-conflict": proposed(tenant, "c", "The user keeps bees"),
        "lt-persist": planned(tenant, "p", "The user speaks Welsh"),
        "retry-1": retry.encode(),
    }
    for topic, record in good.items():
        await publish(settings, topic, [*GARBAGE, record])
    await publish(settings, "summary-check", GARBAGE)
    lines = [f"Day {i} of planning the Lisbon trip: hotels, trams and budget." for i in range(22)]
    chat = [message(tenant, "long", n, content=line) for n, line in enumerate(lines)]
    await publish(settings, "message-written", chat)
    worker = start_worker(settings)

    await remembered(engine, tenant, "peanuts", "cello", "bees", "welsh", "unicycle")
    summaries = SummaryStore(engine)

    async def summarised() -> bool:
        return await summaries.get(tenant, "long") is not None

    await eventually(summarised, within=60, what="the summary behind the garbage")

    async def all_dead_lettered() -> bool:
        return len(await letters(settings)) >= 2 * 6

    await eventually(all_dead_lettered, what="a dead letter for every garbage record")
    found = await letters(settings)
    by_stage = sorted((str(v["stage"]), str(v["reason"])) for v in found)
    stages = ["conflict", "dedupe", "judge", "persist", "retry", "summary"]
    assert by_stage == sorted((stage, "invalid_payload") for stage in stages for _ in GARBAGE)
    for letter in found:
        source = letter["source"]
        assert isinstance(source, dict)
        assert source["topic"] in {settings.topic(n) for n in [*good, "summary-check"]}
        assert letter["payload"] == '{"garbage": 1}' or letter["payload_encoding"] == "base64"
    for topic in ["lt-judge", "lt-dedupe", "lt-conflict", "lt-persist", "summary-check"]:
        await eventually(partial(caught_up, settings, topic), what=f"{topic} committed")
    assert worker.alive()


async def test_an_outage_longer_than_the_old_retry_horizon_loses_nothing(
    services, tenant, engine, start_worker
):
    """The old defaults gave up after 1+2+4+8+16 base delays; here the database stays down for
    twice that (a 15-minute outage, scaled), and a worker restarts in the middle of it."""
    proxy, settings = await proxied_database(
        services,
        topic_partitions=1,
        retry_base_seconds=0.2,
        retry_max_delay_seconds=1.0,
        retry_horizon_seconds=120,
    )
    try:
        await all_topics(settings)
        first = start_worker(settings, "first")
        await proxy.stop()
        await publish(settings, "lt-conflict", [proposed(tenant, "o", "The user keeps bees")])
        old_horizon = 31 * 0.2

        async def failing_for(seconds: float, after: float = 0.0) -> bool:
            tries = [r for r in await waiting(settings, "bees") if failed_at(settings, r) > after]
            return any(failed_at(settings, r) - r.failing.since >= seconds for r in tries)

        await eventually(lambda: failing_for(old_horizon), what="failing for the old horizon")
        first.stop()  # its waiting record was never acknowledged: the next worker has it
        stopped = time.time()
        start_worker(settings, "second")
        await eventually(
            lambda: failing_for(2 * old_horizon, after=stopped),
            what="the second worker failing on it for twice the old horizon",
        )
        assert await letters(settings) == []
        await proxy.start()
        await remembered(engine, tenant, "bees")
        assert await letters(settings) == []
    finally:
        await proxy.stop()


async def test_a_long_backoff_holds_back_no_other_record(services, tenant, engine, start_worker):
    """A record waiting out a long backoff does not delay a record due sooner on the same
    partition: each tier waits the same time for all its records."""
    proxy, settings = await proxied_database(
        services,
        topic_partitions=1,
        retry_base_seconds=1.0,
        retry_max_delay_seconds=64,
        retry_horizon_seconds=600,
    )
    try:
        await all_topics(settings)
        async with client_for(settings) as api:
            answer = await api.put(
                f"/v1/agents/stuck/config?tenant_id={tenant}",
                json={"long_memory_provider": "MEMOS", "model_target_id": "m"},
            )
            assert answer.status_code == 200, answer.text
        start_worker(settings)
        # MemOS is not configured: this one fails on every try, retried after 1, 2, 4, 8, 16 s.
        # Another user's: a user's own later records wait for it (test_user_order.py).
        blocked = proposed(tenant, "a", "The user owns a kayak", agent="stuck", user="user-2")
        await publish(settings, "lt-conflict", [blocked])

        async def on_the_long_tier() -> bool:
            # The fifth failed try: now it waits on the 16 s tier.
            return any(r.failing.attempts == 5 for r in await waiting(settings, "kayak"))

        await eventually(on_the_long_tier, what="the kayak on the 16 s tier")

        async def counted() -> bool:
            try:
                return await metric(settings, "memstream_retry_waiting") == 1
            except httpx.HTTPError:
                return False

        await eventually(counted, within=10, what="the waiting record counted")
        assert await metric(settings, "memstream_records_total", outcome="retried") >= 4
        await proxy.stop()
        await publish(settings, "lt-conflict", [proposed(tenant, "b", "The user keeps bees")])

        async def on_the_short_tier() -> bool:
            # Its first try failed: it waits on the 1 s tier.
            return any(r.failing.attempts == 1 for r in await waiting(settings, "bees"))

        await eventually(on_the_short_tier, what="the bees on the 1 s tier")
        await proxy.start()
        await remembered(engine, tenant, "bees", within=60)
        # Stored before the kayak's next try: never held back behind its long backoff.
        assert max(r.failing.attempts for r in await waiting(settings, "kayak")) == 5
        assert "kayak" not in await memories(engine, tenant, user="user-2")
        assert await letters(settings) == []
    finally:
        await proxy.stop()
