"""The load path's rules through the API on the real database and cache: the summary rule, the
whole-window rule, context_rounds edges, chat turns as rounds, time limits with a sick
database, and the operations views over every provider."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import publish
from memstream.memory import NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.schema import long_term_memory
from memstream.store.summaries import Summary, SummaryStore
from memstream.text.tokens import count_tokens
from tests.fakes.mem0 import MEM0_KEY, Mem0State
from tests.support.api import client_for
from tests.support.faults import proxied_database
from tests.support.kafka import message
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SUMMARY = "The user is planning a rail trip from Lisbon to Vienna in May."


def rows(
    tenant: str, conversation: str, spec: Sequence[tuple[str, str, str]]
) -> list[StoredMessage]:
    """Stored messages from (role, message_type, content), one second apart."""
    start = datetime(2026, 2, 1, 12, 0)
    return [
        StoredMessage(
            tenant_id=tenant,
            conversation_id=conversation,
            event_id=f"{conversation}-{i}",
            user_id="u1",
            agent_id="a1",
            role=role,
            message_type=kind,
            content=content,
            token_count=count_tokens(content),
            created_at=start + timedelta(seconds=i),
            source_conversation_id=conversation,
        )
        for i, (role, kind, content) in enumerate(spec)
    ]


def turns(n: int, words: int = 3) -> list[tuple[str, str, str]]:
    filler = " about trains" * words
    return [("user" if i % 2 == 0 else "assistant", "chat", f"turn {i}{filler}") for i in range(n)]


def body(tenant: str, conversation: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": "a1",
        "conversation_id": conversation,
        "query": "and the night train?",
        **extra,
    }


async def summarise(engine: AsyncEngine, tenant: str, conversation: str, covered: int) -> None:
    await SummaryStore(engine).save(
        tenant,
        conversation,
        Summary(SUMMARY, count_tokens(SUMMARY)),
        covered=covered,
        last_message_id=0,
    )


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(settings) as client:
        yield client


Answer = Callable[..., Any]


async def from_record_then_cache(
    api: httpx.AsyncClient,
    settings: Settings,
    redis_client: aioredis.Redis,
    stored: list[StoredMessage],
    request: dict[str, Any],
) -> list[dict[str, Any]]:
    """The answer with a cold cache (the record), then with the cache warm: they must agree."""
    tenant, conversation = stored[0].tenant_id, stored[0].conversation_id
    cache = RedisCache(
        redis_client, prefix=settings.cache_prefix, max_messages=settings.cache_max_messages
    )
    cold = await api.post("/v1/context", json=request)
    assert cold.status_code == 200, cold.text
    await redis_client.delete(cache.key(tenant, conversation))  # a re-warm may have begun
    await cache.warm({(tenant, conversation): stored})
    warm = await api.post("/v1/context", json=request)
    assert warm.status_code == 200, warm.text
    assert warm.json()["degraded"] == [] and cold.json()["degraded"] == []
    assert warm.json()["messages"] == cold.json()["messages"]
    messages: list[dict[str, Any]] = warm.json()["messages"]
    return messages


async def test_the_summary_stands_for_what_the_rounds_bound_leaves_out(
    api, settings, tenant, store, engine, redis_client
):
    stored = rows(tenant, "c64", turns(64))
    await store.insert_many(stored)
    await summarise(engine, tenant, "c64", covered=60)
    request = body(tenant, "c64", context_rounds=5)
    messages = await from_record_then_cache(api, settings, redis_client, stored, request)
    # 15 turns read (49-63); 49 answers a question left out, so the window starts at 50.
    assert messages[0] == {
        "role": "system",
        "content": SUMMARY,
        "tokens": count_tokens(SUMMARY),
        "summary": True,
    }
    assert [m["content"] for m in messages[1:]] == [c for _, _, c in turns(64)[50:]]
    assert not any(m["summary"] for m in messages[1:])


async def test_no_summary_when_the_window_reaches_the_start(
    api, settings, tenant, store, engine, redis_client
):
    for n, conversation in ((10, "short"), (15, "exact")):
        stored = rows(tenant, conversation, turns(n))
        await store.insert_many(stored)
        await summarise(engine, tenant, conversation, covered=n)
        request = body(tenant, conversation, context_rounds=5)
        messages = await from_record_then_cache(api, settings, redis_client, stored, request)
        # 15 turns: the last is a user turn, the current query, which the window leaves out.
        expected = turns(n)[: n - (n % 2)]
        assert [m["content"] for m in messages] == [c for _, _, c in expected], conversation
        assert not any(m["summary"] for m in messages)


async def test_everything_that_fits_the_whole_window_is_kept(
    api, settings, tenant, store, engine, redis_client
):
    # 14 turns of about 500 tokens: over 8,000 - 2,000 but within 8,000.
    stored = rows(tenant, "big", turns(14, words=230))
    total = sum(m.token_count for m in stored)
    assert settings.window_max_tokens - settings.summary_budget_tokens < total
    assert total <= settings.window_max_tokens
    await store.insert_many(stored)
    await summarise(engine, tenant, "big", covered=14)
    messages = await from_record_then_cache(
        api, settings, redis_client, stored, body(tenant, "big")
    )
    assert len(messages) == 14 and not any(m["summary"] for m in messages)
    assert sum(m["tokens"] for m in messages) == total


async def test_zero_rounds_means_no_history_from_the_cache_and_the_record(
    api, settings, tenant, store, engine, redis_client
):
    put = await api.put(
        f"/v1/agents/a1/config?tenant_id={tenant}",
        json={"context_rounds": 0, "model_target_id": "m1"},
    )
    assert put.status_code == 200, put.text
    assert (await api.get(f"/v1/agents/a1/config?tenant_id={tenant}")).json()["context_rounds"] == 0
    stored = rows(tenant, "z", turns(10))
    await store.insert_many(stored)
    await summarise(engine, tenant, "z", covered=10)
    # The stored 0 applies: the summary alone.
    messages = await from_record_then_cache(api, settings, redis_client, stored, body(tenant, "z"))
    assert [m["content"] for m in messages] == [SUMMARY]
    # So does a requested 0, and without a summary nothing is left.
    bare = rows(tenant, "z2", turns(10))
    await store.insert_many(bare)
    request = body(tenant, "z2", agent_id="other", context_rounds=0)
    assert await from_record_then_cache(api, settings, redis_client, bare, request) == []


async def test_tool_and_status_rows_do_not_eat_the_rounds(services, tenant, store, redis_client):
    # The cache keeps only the newest 12 messages, which hold 3 chat turns among tool traffic.
    settings = isolated_settings(cache_max_messages=12)
    spec: list[tuple[str, str, str]] = []
    for i in range(10):
        spec += [
            ("user", "chat", f"question {i}"),
            ("assistant", "tool_call", f'{{"call": {i}}}'),
            ("tool", "tool_result", f'{{"result": {i}}}'),
            ("assistant", "status", "searching"),
            ("assistant", "chat", f"answer {i}"),
        ]
    stored = rows(tenant, "tools", spec)
    await store.insert_many(stored)
    async with client_for(settings) as api:
        request = body(tenant, "tools", context_rounds=2)
        messages = await from_record_then_cache(api, settings, redis_client, stored, request)
    # Two rounds are six chat turns: questions and answers 7, 8 and 9.
    assert [m["content"] for m in messages] == [
        "question 7",
        "answer 7",
        "question 8",
        "answer 8",
        "question 9",
        "answer 9",
    ]


class Blackhole:
    """A TCP server that accepts connections and never answers: a database that hangs."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._held: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Blackhole:
        async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._held.append(writer)

        self._server = await asyncio.start_server(hold, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._held:
            writer.close()


async def test_a_hanging_database_costs_the_time_limits_not_more(
    services, tenant, store, redis_client
):
    stored = rows(tenant, "sick", turns(6))
    await store.insert_many(stored)
    async with Blackhole() as database:
        settings = isolated_settings(
            database_url=f"mysql+aiomysql://root@127.0.0.1:{database.port}/memstream",
            agent_config_cache_seconds=0,
        )
        cache = RedisCache(redis_client, prefix=settings.cache_prefix)
        await cache.warm({(tenant, "sick"): stored})
        async with client_for(settings) as api:
            response = await api.post("/v1/context", json=body(tenant, "sick"))
    assert response.status_code == 200, response.text
    answer = response.json()
    # An answer at all proves the time limits cut the reads off (the in-process client has no
    # timeout of its own, and the database never answers). The agent config, the summary and
    # long-term memory are out of reach: the turns the cache holds still come.
    assert {"config", "summary", "long_term"} <= set(answer["degraded"])
    assert [m["content"] for m in answer["messages"]] == [c for _, _, c in turns(6)]


async def test_the_operations_views_count_memories_in_external_providers(
    services: Settings, mem0_server: tuple[str, Mem0State], tenant: str, engine: AsyncEngine
) -> None:
    mem0_url, mem0 = mem0_server
    mem0.reset()
    settings = isolated_settings(
        mem0_url=mem0_url, mem0_api_key=MEM0_KEY, agent_config_cache_seconds=0
    )
    await MessageStore(engine).insert_many(rows(tenant, "c1", turns(2)))
    async with client_for(settings) as api:
        put = await api.put(
            f"/v1/agents/m0/config?tenant_id={tenant}",
            json={"long_memory_provider": "MEM0", "model_target_id": "m1"},
        )
        assert put.status_code == 200, put.text

        async def add(cube: str, content: str, memory_type: str = "pref_mem") -> str:
            added = await api.post(
                "/v1/memories",
                json={
                    "tenant_id": tenant,
                    "user_id": "u1",
                    "agent_id": "m0",
                    "cube_id": cube,
                    "memory_type": memory_type,
                    "content": content,
                    "importance": 6,
                },
            )
            assert added.status_code == 201, added.text
            identifier: str = added.json()["id"]
            return identifier

        first = await add("user_profile", "The user drinks green tea")
        await add("agent_m0", "Answer in French", "skill_mem")
        await add("agent_m0", "Answer in French", "skill_mem")  # no duplicate
        await add("user_profile", "The user lives in Porto", "text_mem")

        overview = (await api.get(f"/v1/stats/overview?tenant_id={tenant}")).json()
        assert overview["memories"] == {
            "total": 3,
            "by_type": {"text_mem": 1, "pref_mem": 1, "skill_mem": 1, "tool_mem": 0},
            "by_cube": {"user_profile": 2, "agent_m0": 1},
        }
        assert overview["providers"] == {"MEM0": 3}
        assert overview["top_agents"] == [{"agent_id": "m0", "memories": 3}]
        today = datetime.now().strftime("%Y-%m-%d")
        trends = (
            await api.get(
                "/v1/stats/trends",
                params={"tenant_id": tenant, "bucket": "day", "to": f"{today}T23:59:59Z"},
            )
        ).json()
        assert sum(sum(counts) for counts in trends["memories"].values()) == 3
        cube = (await api.get(f"/v1/stats/cubes/user_profile?tenant_id={tenant}")).json()
        assert cube["total"] == 2 and cube["by_type"]["pref_mem"] == 1
        assert {m["provider"] for m in cube["newest"]} == {"MEM0"}
        assert first in {m["id"] for m in cube["newest"]}

        # Deletes are reflected: one memory, then the whole user.
        assert (await api.delete(f"/v1/memories/{first}?tenant_id={tenant}")).status_code == 200
        overview = (await api.get(f"/v1/stats/overview?tenant_id={tenant}")).json()
        assert overview["memories"]["total"] == 2 and overview["providers"] == {"MEM0": 2}
        forgot = await api.delete(f"/v1/users/u1/memories?tenant_id={tenant}")
        assert forgot.status_code == 200, forgot.text
        overview = (await api.get(f"/v1/stats/overview?tenant_id={tenant}")).json()
        assert overview["memories"]["total"] == 0 and overview["top_agents"] == []


async def test_bodies_over_the_limit_are_refused_before_parsing(services, tenant):
    settings = isolated_settings(api_max_body_bytes=4096)
    async with client_for(settings) as api:
        big = body(tenant, "c1", query="x" * 8000)
        response = await api.post("/v1/context", json=big)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        assert (await api.post("/v1/context", json=body(tenant, "c1"))).status_code == 200


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"),
        ("9999-12-31T23:59:59-14:00", None),
        (None, "0001-01-01T00:00:00+14:00"),
        ("-999999999-01-01T00:00:00Z", None),
        ("99999999999999999999", None),
    ],
)
async def test_dates_at_the_calendars_edges_are_422_not_500(services, tenant, start, end):
    params = {"tenant_id": tenant, "bucket": "hour"}
    if start:
        params["from"] = start
    if end:
        params["to"] = end
    async with client_for(isolated_settings()) as api:
        for path in ("/v1/stats/trends", "/v1/stats/search-trends"):
            response = await api.get(path, params=params)
            assert response.status_code == 422, (path, response.text)
            assert response.json()["error"]["code"]


async def test_a_sick_database_does_not_switch_long_term_memory_back_on(services, tenant):
    proxy, settings = await proxied_database(services, agent_config_cache_seconds=0)
    try:
        async with client_for(settings) as api:
            put = await api.put(
                f"/v1/agents/quiet/config?tenant_id={tenant}",
                json={"open_long_memory": False, "model_target_id": "m1"},
            )
            assert put.status_code == 200, put.text
            request = body(tenant, "c1", agent_id="quiet")
            before = (await api.post("/v1/context", json=request)).json()
            assert before["long_term"]["provider"] is None and before["degraded"] == []
            await proxy.stop()
            after = (await api.post("/v1/context", json=request)).json()
            # The config read last still holds: no long-term query for this agent.
            assert "config" in after["degraded"]
            assert after["long_term"]["provider"] is None
    finally:
        await proxy.stop()


# --- the long-term chain honours the same agent config ------------------------------------


def session(tenant: str, conversation: str, agent: str, facts: list[str]) -> list[dict[str, Any]]:
    events = []
    for i, fact in enumerate(facts):
        events.append(message(tenant, conversation, 2 * i, agent_id=agent, content=fact))
        events.append(
            message(
                tenant, conversation, 2 * i + 1, agent_id=agent, role="assistant", content="Noted."
            )
        )
    return events


def ended(tenant: str, conversation: str, agent: str) -> dict[str, Any]:
    return {
        "event_id": f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": agent,
        "conversation_id": conversation,
    }


async def session_outcomes(settings: Settings) -> dict[str, float]:
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"http://127.0.0.1:{settings.worker_web_port}/metrics")
    except httpx.ConnectError:
        return {}  # the worker is still starting
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == "memstream_events_total" and sample.labels.get("stage") == "session"
    }


async def memory_sources(engine: AsyncEngine, tenant: str) -> set[str]:
    """The conversations the tenant's live memories came from."""
    query = select(long_term_memory.c.source_event_ids).where(
        long_term_memory.c.tenant_id == tenant, long_term_memory.c.deleted_at.is_(None)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {str(e).rsplit("-", 1)[0] for (ids,) in rows for e in ids}


async def test_agents_without_long_term_memory_build_none(settings, tenant, engine, start_worker):
    start_worker(settings)
    async with client_for(settings) as api:
        for agent, config in {
            "quiet": {"open_long_memory": False, "model_target_id": "m1"},
            "unbound": {"open_long_memory": True, "model_target_id": None},
            "talker": {"open_long_memory": True, "model_target_id": "m1"},
        }.items():
            put = await api.put(f"/v1/agents/{agent}/config?tenant_id={tenant}", json=config)
            assert put.status_code == 200, put.text
    # "stranger" has no config row: the defaults, long-term memory on. Each says other facts,
    # so none is skipped as already known.
    agents = {"q": "quiet", "u": "unbound", "t": "talker", "s": "stranger"}
    cities = {"q": "Lisbon", "u": "Oslo", "t": "Porto", "s": "Kyoto"}
    for conversation, agent in agents.items():
        facts = [f"I live in {cities[conversation]}.", f"My sister {agent} is a nurse."]
        await publish(settings, "message-written", session(tenant, conversation, agent, facts))
    await publish(settings, "session-ended", [ended(tenant, c, a) for c, a in agents.items()])

    async def all_ended() -> bool:
        outcomes = await session_outcomes(settings)
        return outcomes.get("long_term_off", 0) >= 2 and outcomes.get("judged", 0) >= 2

    await eventually(all_ended, within=90, what="four sessions handled")
    await eventually(
        lambda: _has(memory_sources(engine, tenant), {"t", "s"}), within=90, what="memories"
    )
    assert await memory_sources(engine, tenant) == {"t", "s"}


async def _has(found: Awaitable[set[str]], wanted: set[str]) -> bool:
    return wanted <= await found


async def test_the_judge_asks_for_the_agents_bound_model(
    services, tenant, engine, start_worker, llm_server
):
    url, script = llm_server
    script.reset()
    settings = isolated_settings(
        llm_base_url=url, llm_model="global-model", llm_models="m-small=small-model"
    )
    start_worker(settings)
    async with client_for(settings) as api:
        for agent, target in (("small", "m-small"), ("other", "m-unlisted")):
            put = await api.put(
                f"/v1/agents/{agent}/config?tenant_id={tenant}",
                json={"model_target_id": target},
            )
            assert put.status_code == 200, put.text
    lines = {"small": "I live in Porto.", "other": "I live in Turku."}
    for agent, line in lines.items():
        await publish(settings, "message-written", session(tenant, agent, agent, [line]))
    await publish(settings, "session-ended", [ended(tenant, a, a) for a in lines])

    def model_for(line: str) -> str | None:
        for request in list(script.requests):
            if any(line in m.get("content", "") for m in request["messages"]):
                return str(request["model"])
        return None

    async def both_asked() -> bool:
        return all(model_for(line) for line in lines.values())

    # The scripted server answers errors, so the rules judge afterwards: only the ask matters.
    await eventually(both_asked, within=90, what="judge requests")
    assert model_for(lines["small"]) == "small-model"
    assert model_for(lines["other"]) == "global-model"


async def test_a_kept_answer_serves_its_fresh_time_and_this_process_writes_at_once(engine, tenant):
    def memory(content: str) -> NewMemory:
        return NewMemory(tenant, "u1", "a1", "user_profile", "pref_mem", content)

    async def found(provider: BuiltinProvider, query: str) -> list[str]:
        return [m.content for m in await provider.search(tenant, "u1", "a1", query)]

    # What another process writes is searchable once the fresh time is over; what this one
    # writes or deletes, at once. A kept answer is checked live on every hit, so a delete
    # through another process is never served either (tests/integration/test_postings_search.py).
    api, worker = BuiltinProvider(engine, fresh_seconds=0.5), BuiltinProvider(engine)
    await worker.add([memory("The user drinks green tea every morning")])
    assert await found(api, "green tea") == ["The user drinks green tea every morning"]
    await worker.add([memory("The user plays the cello on Sundays")])

    async def cello() -> bool:
        return await found(api, "cello") == ["The user plays the cello on Sundays"]

    await eventually(cello, within=10, what="the other process's memory searchable")
    (peanuts,) = await api.add([memory("The user is allergic to peanuts")])
    assert await found(api, "peanuts") == ["The user is allergic to peanuts"]
    await api.delete(tenant, [peanuts.id])
    assert await found(api, "peanuts") == []


async def test_a_known_config_serves_while_it_is_read_again(services, tenant, caplog):
    caplog.set_level(logging.WARNING, logger="memstream.loadpath.assemble")
    proxy, settings = await proxied_database(services, agent_config_cache_seconds=0.2)
    try:
        async with client_for(settings) as api:
            put = await api.put(
                f"/v1/agents/quiet/config?tenant_id={tenant}",
                json={"open_long_memory": False, "model_target_id": "m1"},
            )
            assert put.status_code == 200, put.text
            request = body(tenant, "c1", agent_id="quiet")
            assert (await api.post("/v1/context", json=request)).json()["degraded"] == []
            await proxy.stop()
            answers = []

            async def read_again() -> bool:
                answers.append((await api.post("/v1/context", json=request)).json())
                return "agent config refresh failed" in caplog.text

            # Once older than the cache time the config is read again, off the path (and that
            # read fails): every answer until then and after serves the config known.
            await eventually(read_again, within=10, what="the config read again")
            assert all("config" not in a["degraded"] for a in answers), answers
            assert all(a["long_term"]["provider"] is None for a in answers), answers
    finally:
        await proxy.stop()
