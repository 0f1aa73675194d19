"""The history stage end to end on the real services: Kafka in, MariaDB and Redis out."""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
import pytest
import redis.asyncio as aioredis

from memstream.broker.clients import producer
from memstream.broker.groups import caught_up, live_members
from memstream.broker.topics import ensure_topics, publish
from memstream.roles import history_group
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore
from memstream.text.tokens import count_tokens
from tests.support.kafka import message, read_topic
from tests.support.processes import run_cli
from tests.support.settings import unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def cache_for(settings: Settings, client: aioredis.Redis) -> RedisCache:
    return RedisCache(
        client, prefix=settings.cache_prefix, max_messages=settings.cache_max_messages
    )


async def stored(store: MessageStore, tenant: str, expected: int) -> None:
    async def check() -> bool:
        return await store.count(tenant) >= expected

    await eventually(check, what=f"{expected} stored messages of {tenant}")


async def test_messages_reach_the_record_and_the_cache(
    settings, tenant, store, redis_client, start_worker
):
    events = [message(tenant, f"conv-{c}", n) for c in range(3) for n in range(40)]
    events.append(message(tenant, "conv-untimed", 0, created_at=None))
    await publish(settings, "message-written", events)
    start_worker(settings)
    await stored(store, tenant, len(events))

    rows = await store.recent(tenant, "conv-1", 100)
    assert [r.content for r in rows] == [f"message number {n} of conv-1" for n in range(40)]
    assert all(r.token_count == count_tokens(r.content) for r in rows)
    assert rows[0].agent_id == "agent-1" and rows[0].user_id == "user-1"
    untimed = await store.recent(tenant, "conv-untimed", 1)
    assert untimed[0].created_at.year >= 2026  # the Kafka record time stands in

    # The record is written first and the cache after it, so the cache may trail the count.
    cache = cache_for(settings, redis_client)

    async def cached_all() -> bool:
        return await redis_client.zcard(cache.key(tenant, "conv-2")) == 40

    await eventually(cached_all, what="conv-2 in the cache")
    cached = await cache.recent(tenant, "conv-2", 10)
    assert cached is not None
    assert [m.content for m in cached] == [f"message number {n} of conv-2" for n in range(30, 40)]
    assert [m.token_count for m in cached] == [r.token_count for r in rows[30:40]]
    ttl = await redis_client.pttl(cache.key(tenant, "conv-2"))
    assert 0 < ttl <= settings.cache_ttl_seconds * 1000


async def test_cache_keeps_the_newest_messages_only(
    services, tenant, store, redis_client, start_worker
):
    from tests.support.settings import isolated_settings

    settings = isolated_settings(cache_max_messages=25, batch_max_events=10)
    events = [message(tenant, "long", n) for n in range(60)]
    await publish(settings, "message-written", events)
    start_worker(settings)
    await stored(store, tenant, 60)
    cache = cache_for(settings, redis_client)

    async def trimmed() -> bool:
        return await redis_client.zcard(cache.key(tenant, "long")) == 25

    await eventually(trimmed, what="cache trimmed to 25")
    cached = await cache.recent(tenant, "long", 100)
    assert cached is not None
    assert [m.event_id for m in cached] == [f"long-{n}" for n in range(35, 60)]


async def test_duplicates_and_replay_change_nothing(
    settings, tenant, store, redis_client, start_worker
):
    events = [message(tenant, f"c{c}", n) for c in range(4) for n in range(30)]
    await publish(settings, "message-written", events + events[:50])  # 50 exact duplicates
    worker = start_worker(settings)
    await stored(store, tenant, 120)
    await eventually(lambda: caught_up(settings, "message-written"), what="offsets committed")
    cache = cache_for(settings, redis_client)
    before = {c: await redis_client.zrange(cache.key(tenant, f"c{c}"), 0, -1) for c in range(4)}

    # A live group refuses a rewind.
    refused = run_cli(settings, "replay", "--topic", "message-written", "--to", "earliest")
    assert refused.returncode == 2
    assert "live member" in refused.stderr

    worker.stop()

    async def left() -> bool:
        return await live_members(settings, history_group(settings.app_id)) == []

    await eventually(left, within=30, what="the stopped worker out of the group")
    replayed = run_cli(settings, "replay", "--topic", "message-written", "--to", "earliest")
    assert replayed.returncode == 0, replayed.stderr
    assert "-> 0" in replayed.stdout
    assert not await caught_up(settings, "message-written")

    start_worker(settings)
    await eventually(lambda: caught_up(settings, "message-written"), what="replay consumed")
    assert await store.count(tenant) == 120
    after = {c: await redis_client.zrange(cache.key(tenant, f"c{c}"), 0, -1) for c in range(4)}
    assert after == before
    assert all(len(members) == 30 for members in after.values())


async def test_sub_agent_rule(settings, tenant, store, start_worker):
    events = [
        message(tenant, "parent", 0),
        message(tenant, "agent:parent", 1, content="sub-agent says hello"),
        message(tenant, "agent:parent", 2, message_type="tool_call", role="assistant"),
        message(tenant, "agent:parent", 3, message_type="tool_result", role="tool"),
        message(tenant, "agent:parent", 4, message_type="status", role="assistant"),
        message(tenant, "parent", 5, message_type="tool_call", role="assistant"),
    ]
    await publish(settings, "message-written", events)
    start_worker(settings)
    await eventually(lambda: caught_up(settings, "message-written"), what="all consumed")
    rows = await store.recent(tenant, "parent", 10)
    assert [(r.event_id, r.source_conversation_id) for r in rows] == [
        ("parent-0", "parent"),
        ("agent:parent-1", "agent:parent"),
        ("parent-5", "parent"),
    ]
    assert await store.count(tenant, "agent:parent") == 0
    assert not await read_topic(settings, "dead-letter")


BAD_INPUTS: list[tuple[bytes | None, str]] = [
    (b"\xff\xfe not utf-8", "invalid_encoding"),
    (b"{not json", "invalid_json"),
    (b"[1, 2, 3]", "not_an_object"),
    (b'"just a string"', "not_an_object"),
    (b"", "empty_value"),
]


def bad_events(tenant: str) -> list[tuple[dict[str, object], str]]:
    good = message(tenant, "bad", 0)
    missing = {k: v for k, v in good.items() if k != "event_id"}
    return [
        (missing, "schema_violation"),
        ({**good, "conversation_id": ""}, "schema_violation"),
        ({**good, "user_id": "   "}, "schema_violation"),
        ({**good, "tenant_id": True}, "schema_violation"),
        ({**good, "content": 42}, "schema_violation"),
        ({**good, "role": "robot"}, "schema_violation"),
        ({**good, "message_type": "thought"}, "schema_violation"),
        ({**good, "event_id": "x" * 129}, "schema_violation"),
        ({**good, "metadata": [1]}, "schema_violation"),
        ({**good, "created_at": "yesterday"}, "invalid_timestamp"),
        ({**good, "created_at": "2026-01-01 10:00:00"}, "invalid_timestamp"),
        ({**good, "content": "x" * 40000}, "content_too_large"),
    ]


async def test_every_bad_input_lands_in_dead_letter(settings, tenant, store, start_worker):
    bad = bad_events(tenant)
    stream: list[bytes | dict[str, object]] = []
    expected: list[str] = []
    for i, (raw, reason) in enumerate(BAD_INPUTS + [(orjson.dumps(e), r) for e, r in bad]):
        stream.append(message(tenant, "good", i))  # good events all around the bad ones
        stream.append(raw if raw is not None else b"")
        expected.append(reason)
    stream.append(message(tenant, "good", 999))
    await publish(settings, "message-written", stream)
    start_worker(settings)
    await stored(store, tenant, len(expected) + 1)

    async def all_dead_lettered() -> bool:
        return len(await read_topic(settings, "dead-letter")) >= len(expected)

    await eventually(all_dead_lettered, what="dead letters")
    letters = [value for _, value in await read_topic(settings, "dead-letter")]
    assert sorted(letter["reason"] for letter in letters) == sorted(expected)
    for letter in letters:
        assert letter["stage"] == "history"
        assert letter["detail"].endswith(".")
        assert letter["source"]["topic"] == settings.topic("message-written")
        assert letter["source"]["offset"] >= 0
        assert letter["payload_encoding"] in ("utf8", "base64")
        assert letter["failed_at"].endswith("Z")
    binary = next(v for v in letters if v["reason"] == "invalid_encoding")
    assert binary["payload_encoding"] == "base64"
    assert await store.count(tenant, "bad") == 0
    assert await store.count(tenant, "good") == len(expected) + 1


async def test_a_mixed_file_through_publish_ends_up_as_the_contract_says(
    settings, tenant, store, start_worker, tmp_path
):
    """2,000 lines with duplicates, sub-agent traffic and malformed lines, via the CLI."""
    lines: list[bytes] = []
    for n in range(1700):
        lines.append(orjson.dumps(message(tenant, f"c{n % 17}", n)))
    lines += [orjson.dumps(message(tenant, f"c{n % 17}", n)) for n in range(0, 1500, 10)]  # 150
    lines += [
        orjson.dumps(message(tenant, "agent:c1", 5000 + n, content=f"sub-agent note {n}"))
        for n in range(50)
    ]
    lines += [
        orjson.dumps(
            message(tenant, "agent:c1", 6000 + n, message_type="tool_call", role="assistant")
        )
        for n in range(50)
    ]
    malformed = [b"{oops", b"[]", b'{"event_id": 1}', b"\xff\xfe", b'"text"'] * 10
    lines += malformed
    assert len(lines) == 2000
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    done = run_cli(settings, "publish", str(path), "--topic", "message-written", "--no-validate")
    assert done.returncode == 0, done.stderr
    start_worker(settings)
    await eventually(lambda: caught_up(settings, "message-written"), what="all consumed")

    assert await store.count(tenant) == 1700 + 50  # duplicates once, sub-agent chat kept
    assert await store.count(tenant, "c1") == 100 + 50
    assert await store.count(tenant, "agent:c1") == 0
    letters = [v for _, v in await read_topic(settings, "dead-letter")]
    assert len(letters) == len(malformed)
    assert {v["reason"] for v in letters} == {
        "invalid_json",
        "not_an_object",
        "schema_violation",
        "invalid_encoding",
    }


YEAR_10000_MS = 253_402_300_800_000  # a CreateTime Kafka accepts and Python has no date for


async def publish_stamped(
    settings: Settings, topic_name: str, records: list[tuple[bytes, bytes, int | None]]
) -> None:
    """Publish (key, value, CreateTime in ms or None for now) records in order."""
    async with producer(settings) as client:
        sent = [
            await client.send(settings.topic(topic_name), value, key=key, timestamp_ms=stamp)
            for key, value, stamp in records
        ]
        await asyncio.gather(*sent)


async def test_dates_at_the_calendar_edges_never_stop_ingest(settings, tenant, store, start_worker):
    """Values the schema accepts but that have no UTC time (or a CreateTime in year 10000) are
    dead letters; everything around them is stored, for every tenant, and the worker lives."""
    other = unique("tenant")
    await ensure_topics(settings)
    records: list[tuple[bytes, bytes, int | None]] = []
    expected: list[tuple[str, int | None]] = []  # (reason, CreateTime of the letter's source)

    def add(event: dict[str, object], stamp: int | None = None) -> None:
        records.append((b"shared", orjson.dumps(event), stamp))

    for n, edge in enumerate(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]):
        add(message(tenant, "shared", 10 * n))
        add(message(tenant, "shared", 10 * n + 1, created_at=edge))
        expected.append(("invalid_timestamp", None))
        add(message(other, "shared", 10 * n + 2))
    add(message(tenant, "shared", 30), YEAR_10000_MS)  # has created_at: stored
    add(message(tenant, "shared", 31, created_at=None), YEAR_10000_MS)
    expected.append(("invalid_timestamp", YEAR_10000_MS))
    records.append((b"shared", b"{not json", YEAR_10000_MS))
    expected.append(("invalid_json", YEAR_10000_MS))
    add(message(other, "shared", 32))
    await publish_stamped(settings, "message-written", records)
    end = {"event_id": "end-1", "tenant_id": tenant, "user_id": "user-1", "conversation_id": "s"}
    await publish(settings, "session-ended", [{**end, "ended_at": "9999-12-31T23:59:59-00:30"}])
    worker = start_worker(settings)

    await stored(store, tenant, 3)
    await stored(store, other, 3)
    await eventually(lambda: caught_up(settings, "message-written"), what="all consumed")

    async def all_dead_lettered() -> bool:
        return len(await read_topic(settings, "dead-letter")) >= len(expected) + 1

    await eventually(all_dead_lettered, what="dead letters")
    letters = [value for _, value in await read_topic(settings, "dead-letter")]
    history = [v for v in letters if v["stage"] == "history"]
    assert Counter((v["reason"], v["source"].get("timestamp_ms")) for v in history) == Counter(
        expected
    )
    (session,) = [v for v in letters if v["stage"] == "session"]
    assert session["reason"] == "invalid_timestamp" and "ended_at" in session["detail"]
    assert await store.count(tenant) == 3 and await store.count(other) == 3
    assert worker.alive()
