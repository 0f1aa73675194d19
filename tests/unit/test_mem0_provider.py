"""The Mem0 provider against a fake server speaking the Mem0 REST API (``tests.fakes.mem0``,
its ASGI app served in process, with in-memory state): request shapes, tenant namespacing,
scopes, score normalisation, failures, slow replies, idempotent adds and ownership on delete."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from memstream.errors import ProviderUnavailable
from memstream.memory import NewMemory
from memstream.providers.mem0 import Mem0Provider, mem0_user, normalise_score
from tests.fakes.mem0 import MEM0_KEY, Mem0State, mem0_app
from tests.support.providers import new_memory, provider_failures
from tests.support.settings import free_port


def in_process(state: Mem0State, **options: Any) -> Mem0Provider:
    """A provider on the fake Mem0 server, served in this process through its ASGI app."""
    transport = httpx.ASGITransport(app=mem0_app(state))
    return Mem0Provider("http://mem0.test", MEM0_KEY, transport=transport, **options)


@pytest.fixture
async def mem0() -> AsyncIterator[tuple[Mem0Provider, Mem0State]]:
    state = Mem0State()
    # A timeout a loaded machine cannot miss; the test of a slow server sets its own.
    provider = in_process(state, timeout=10, backoff_seconds=0.01)
    yield provider, state
    await provider.aclose()


def failures(call: str) -> float:
    return provider_failures("MEM0", call)


def new(content: str, cube: str = "user_profile", **fields: Any) -> NewMemory:
    values: dict[str, Any] = {"importance": 8, "source_event_ids": ("e1",)}
    return new_memory(content, cube, **{**values, **fields})


USER = mem0_user("t1", "u1")


def test_score_normalisation() -> None:
    assert normalise_score(0.8, "similarity") == 0.8
    assert normalise_score(1.3, "similarity") == 1.0
    assert normalise_score(-0.2, "similarity") == 0.0
    assert normalise_score(0.2, "distance") == 0.8
    assert normalise_score(1.6, "distance") == 0.0
    assert normalise_score(3.0, "unbounded") == 0.75
    assert normalise_score(float("nan"), "similarity") == 0.0
    assert normalise_score(None, "similarity") == 0.0
    assert normalise_score(True, "similarity") == 0.0


async def test_search_scopes_and_request_shape(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    profile = state.seed(USER, "The user drinks green tea", metadata={"memory_type": "pref_mem"})
    agent = state.seed(USER, "Recommend green tea blends", agent_id="a1")
    other_agent = state.seed(USER, "green tea for agent two", agent_id="a2")
    state.seed(mem0_user("t2", "u1"), "The user drinks green tea")
    state.seed(mem0_user("t1", "u2"), "The user drinks green tea")
    state.seed(USER, "The user owns a bicycle")

    found = await provider.search("t1", "u1", "a1", "green tea", top_k=4)

    bodies = sorted(
        (r.body for r in state.calls("POST", "/search")), key=lambda b: len(b["filters"])
    )
    assert bodies == [
        {"query": "green tea", "filters": {"user_id": "t1:u1"}, "top_k": 12, "threshold": 0.45},
        {
            "query": "green tea",
            "filters": {"user_id": "t1:u1", "agent_id": "a1"},
            "top_k": 4,
            "threshold": 0.45,
        },
    ]
    assert all(r.headers["x-api-key"] == MEM0_KEY for r in state.requests)
    assert all(r.headers["authorization"] == f"Bearer {MEM0_KEY}" for r in state.requests)
    by_id = {m.id: m for m in found}
    assert set(by_id) == {profile, agent}  # the other agent's memory is not this agent's
    assert other_agent not in by_id
    assert by_id[profile].cube_id == "user_profile" and by_id[profile].memory_type == "pref_mem"
    assert by_id[profile].agent_id is None
    assert by_id[agent].cube_id == "agent_a1" and by_id[agent].agent_id == "a1"
    assert by_id[agent].tenant_id == "t1" and by_id[agent].user_id == "u1"
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert all(0.0 <= m.score <= 1.0 for m in found)


async def test_distance_scores_are_normalised() -> None:
    state = Mem0State()
    state.score_kind = "distance"
    close = state.seed(USER, "close")
    far = state.seed(USER, "far")
    useless = state.seed(USER, "useless")
    state.score.update({close: 0.9, far: 0.5, useless: 0.1})  # similarities
    provider = in_process(state, score_kind="distance", backoff_seconds=0.01)
    try:
        found = await provider.search("t1", "u1", None, "anything", top_k=5)
    finally:
        await provider.aclose()
    assert [(m.id, m.score) for m in found] == [(close, 0.9), (far, 0.5)]
    [seen] = state.calls("POST", "/search")
    assert "threshold" not in seen.body  # Mem0 would compare it with a distance


async def test_search_failures_raise(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    state.seed(USER, "green tea")
    before = failures("search")

    state.http_error["POST /search"] = 500
    with pytest.raises(ProviderUnavailable, match="HTTP 500"):
        await provider.search("t1", "u1", None, "green tea")
    assert len(state.calls("POST", "/search")) == 2  # one retry
    state.http_error.clear()

    state.malformed.add("POST /search")
    with pytest.raises(ProviderUnavailable, match="instead of a list"):
        await provider.search("t1", "u1", None, "green tea")
    state.malformed.clear()

    state.delay["POST /search"] = 2.0  # beyond a 0.5 s client timeout: cut off, not repeated
    asked = len(state.calls("POST", "/search"))
    hasty = in_process(state, timeout=0.5)
    try:
        with pytest.raises(ProviderUnavailable, match=r"did not answer within 0\.5s"):
            await hasty.search("t1", "u1", None, "green tea")
    finally:
        await hasty.aclose()
    assert len(state.calls("POST", "/search")) == asked + 1
    state.delay.clear()
    assert failures("search") == before + 3

    state.fail_next["POST /search"] = 1
    assert [m.content for m in await provider.search("t1", "u1", None, "green tea")] == [
        "green tea"
    ]

    down = Mem0Provider(f"http://127.0.0.1:{free_port()}", MEM0_KEY, backoff_seconds=0.01)
    try:
        with pytest.raises(ProviderUnavailable, match="not reachable"):
            await down.search("t1", "u1", None, "tea")
    finally:
        await down.aclose()


async def test_add_stores_as_is_and_never_twice(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    [profile] = await provider.add([new("The user likes jazz", memory_type="pref_mem")])
    [agent] = await provider.add([new("Suggest jazz playlists", cube="agent_a1")])

    adds = [r.body for r in state.calls("POST", "/memories")]
    assert adds[0] == {
        "messages": [{"role": "user", "content": "The user likes jazz"}],
        "user_id": "t1:u1",
        "metadata": {
            "memstream_tenant": "t1",
            "memstream_cube": "user_profile",
            "memstream_key": profile.extra["memstream_key"],
            "memory_type": "pref_mem",
            "importance": 8,
            "source_event_ids": ["e1"],
        },
        "infer": False,
    }
    assert "agent_id" not in adds[0]
    assert adds[1]["agent_id"] == "a1" and adds[1]["metadata"]["memstream_cube"] == "agent_a1"
    assert profile.id in state.memories and agent.id in state.memories
    assert (profile.cube_id, profile.memory_type, profile.importance) == (
        "user_profile",
        "pref_mem",
        8,
    )
    assert agent.cube_id == "agent_a1" and agent.agent_id == "a1"

    state.requests.clear()
    again = await provider.add(
        [new("the user LIKES jazz"), new("Suggest jazz playlists", cube="agent_a1")]
    )
    assert [m.id for m in again] == [profile.id, agent.id]
    assert not state.calls("POST", "/memories")
    [listing] = state.calls("GET", "/memories")
    assert listing.body == {"user_id": "t1:u1", "limit": "1000"}

    # Same text, other cube: another memory. A batch repeating itself: once.
    items = await provider.add(
        [new("The user likes jazz", cube="agent_a1"), new("The user likes jazz ", cube="agent_a1")]
    )
    assert items[0].id == items[1].id != profile.id
    assert state.texts(USER).count("The user likes jazz") == 2


async def test_episodes_keep_their_kind_and_date(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    said = datetime(2026, 1, 31, 23, 30, tzinfo=UTC)
    [episode] = await provider.add(
        [
            new(
                "On 31 January 2026 the user said they passed the exam.",
                kind="episode",
                occurred_at=said,
            )
        ]
    )
    [fact] = await provider.add([new("The user passed the exam.")])
    first, second = (r.body for r in state.calls("POST", "/memories"))
    assert first["infer"] is False and second["infer"] is False
    assert first["metadata"]["memstream_kind"] == "episode"
    assert first["metadata"]["memstream_occurred_at"] == "2026-01-31T23:30:00+00:00"
    assert "memstream_kind" not in second["metadata"]
    assert (episode.kind, episode.occurred_at) == ("episode", said)
    assert (fact.kind, fact.occurred_at) == ("fact", None)
    hits = {m.id: m for m in await provider.search("t1", "u1", None, "the user passed the exam")}
    listed = {m.id: m for m in await provider.list_live("t1", "u1", None)}
    for found in (hits, listed):
        assert (found[episode.id].kind, found[episode.id].occurred_at) == ("episode", said)
        assert (found[fact.id].kind, found[fact.id].occurred_at) == ("fact", None)


async def test_add_is_repeated_only_after_checking(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    state.store_then_fail = True
    [item] = await provider.add([new("The user speaks Dutch")])
    assert len(state.calls("POST", "/memories")) == 1
    assert state.texts(USER) == ["The user speaks Dutch"] and item.id in state.memories

    state.fail_next["POST /memories"] = 1
    await provider.add([new("The user speaks Welsh")])
    assert len(state.calls("POST", "/memories")) == 3
    assert state.texts(USER) == ["The user speaks Dutch", "The user speaks Welsh"]

    state.http_error["POST /memories"] = 400
    with pytest.raises(ProviderUnavailable, match="HTTP 400"):
        await provider.add([new("The user speaks Frisian")])
    assert len(state.calls("POST", "/memories")) == 4


async def test_delete_only_the_tenants_memories(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    mine = state.seed(USER, "one")
    agent = state.seed(USER, "two", agent_id="a1")
    theirs = state.seed(mem0_user("t2", "u1"), "three")
    tricky = state.seed(mem0_user("t1:x", "u1"), "four")

    deleted = await provider.delete("t1", [mine, agent, theirs, tricky, "missing"])

    assert sorted(deleted) == sorted([mine, agent])
    assert set(state.memories) == {theirs, tricky}
    removed = sorted(r.path for r in state.calls("DELETE", "/memories/"))
    assert removed == sorted([f"/memories/{mine}", f"/memories/{agent}"])
    assert len(state.calls("GET", "/memories/")) == 5

    state.http_error["DELETE /memories/{id}"] = 500
    other = state.seed(USER, "five")
    with pytest.raises(ProviderUnavailable):
        await provider.delete("t1", [other])
    assert other in state.memories


async def test_list_live_and_delete_user(mem0: tuple[Mem0Provider, Mem0State]) -> None:
    provider, state = mem0
    old = state.seed(USER, "old", age_seconds=100)
    new_ = state.seed(USER, "new", age_seconds=1)
    agent = state.seed(USER, "agent", agent_id="a1", age_seconds=50)
    other_agent = state.seed(USER, "other agent", agent_id="a2")
    other_user = state.seed(mem0_user("t1", "u2"), "not mine")

    live = await provider.list_live("t1", "u1", "a1")
    assert [m.id for m in live] == [new_, agent, old]
    assert [m.id for m in await provider.list_live("t1", "u1", None)] == [new_, old]

    deleted = await provider.delete_user("t1", "u1")
    assert sorted(deleted) == sorted([old, new_, agent, other_agent])
    assert set(state.memories) == {other_user}

    state.http_error["GET /memories"] = 503
    with pytest.raises(ProviderUnavailable):
        await provider.list_live("t1", "u1", None)


async def test_api_key_is_never_logged(
    mem0: tuple[Mem0Provider, Mem0State], caplog: pytest.LogCaptureFixture
) -> None:
    provider, state = mem0
    caplog.set_level(logging.DEBUG)
    state.fail_next["POST /search"] = 1
    state.http_error["POST /memories"] = 401
    await provider.search("t1", "u1", None, "tea")
    with pytest.raises(ProviderUnavailable) as caught:
        await provider.add([new("x y z")])
    assert MEM0_KEY not in caplog.text and MEM0_KEY not in str(caught.value)
    assert MEM0_KEY not in repr(provider)
