"""The MemOS provider against a fake server speaking MemOS's ``/product`` API
(``tests.fakes.memos``, its ASGI app served in process, with in-memory state): request shapes,
tenant namespacing, parsing of every bucket, error envelopes, slow replies, code-200 delete
failures, async temporary ids, idempotent adds and the retry rules."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from memstream.errors import ProviderUnavailable
from memstream.memory import NewMemory
from memstream.providers.memos import MemOSProvider, memos_cube
from tests.fakes.memos import MEMOS_KEY, MemOSState, memos_app
from tests.support.providers import new_memory, provider_failures
from tests.support.settings import free_port


def in_process(state: MemOSState, **options: Any) -> MemOSProvider:
    """A provider on the fake MemOS server, served in this process through its ASGI app."""
    transport = httpx.ASGITransport(app=memos_app(state))
    return MemOSProvider("http://memos.test", MEMOS_KEY, transport=transport, **options)


@pytest.fixture
async def memos() -> AsyncIterator[tuple[MemOSProvider, MemOSState]]:
    state = MemOSState()
    # A timeout a loaded machine cannot miss; the test of a slow server sets its own.
    provider = in_process(
        state,
        timeout=10,
        confirm_delays=(0.05, 0.1),
        backoff_seconds=0.01,
        agents_of=agents_of,
    )
    yield provider, state
    await provider.aclose()


async def agents_of(tenant_id: str) -> list[str]:
    return ["a1", "a2"]


def failures(call: str) -> float:
    return provider_failures("MEMOS", call)


def new(content: str, cube: str = "user_profile", **fields: Any) -> NewMemory:
    values: dict[str, Any] = {"importance": 7, "source_event_ids": ("e1", "e2")}
    return new_memory(content, cube, **{**values, **fields})


PROFILE = memos_cube("t1", "u1", "user_profile")
AGENT = memos_cube("t1", "u1", "agent_a1")


# --- search --------------------------------------------------------------------------------


async def test_namespaces_are_injective() -> None:
    assert PROFILE == "t1:u1:user_profile"
    assert memos_cube("a:b", "c", "user_profile") != memos_cube("a", "b:c", "user_profile")
    assert memos_cube("a:b", "c", "user_profile") == "a%3Ab:c:user_profile"


async def test_search_sends_the_documented_request_and_parses_every_bucket(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    tea = state.seed(PROFILE, "The user drinks green tea every morning")
    state.seed(PROFILE, "The user has a cat")
    pref = state.seed(PROFILE, "Prefers tea without sugar", bucket="pref_mem")
    skill = state.seed(AGENT, "Brew tea at 80 degrees for green tea", bucket="skill_mem")
    tool = state.seed(AGENT, "Use the tea timer tool", bucket="tool_mem")
    # The same words in another tenant's and another user's cubes must never show up.
    state.seed(memos_cube("t2", "u1", "user_profile"), "The user drinks green tea every morning")
    state.seed(memos_cube("t1", "u2", "user_profile"), "The user drinks green tea every morning")
    state.relativity[tool] = 1.7  # out of range: clamped

    found = await provider.search("t1", "u1", "a1", "green tea morning", top_k=5)

    [seen] = state.calls("/product/search")
    assert seen.method == "POST"
    assert seen.headers["authorization"] == f"Bearer {MEMOS_KEY}"
    assert seen.body == {
        "query": "green tea morning",
        "user_id": "t1:u1",
        "readable_cube_ids": [PROFILE, AGENT],
        "mode": "fast",
        "top_k": 5,
        "relativity": 0.45,
        "dedup": "mmr",
        "include_preference": True,
        "pref_top_k": 6,
    }
    by_id = {m.id: m for m in found}
    assert set(by_id) == {tea, skill, tool}  # the cat and the sugar score below 0.45
    assert by_id[tea].cube_id == "user_profile" and by_id[tea].memory_type == "text_mem"
    assert by_id[skill].cube_id == "agent_a1" and by_id[skill].memory_type == "skill_mem"
    assert by_id[skill].agent_id == "a1"
    assert by_id[tool].memory_type == "tool_mem" and by_id[tool].score == 1.0
    assert by_id[tea].score == 1.0 and by_id[tea].tenant_id == "t1" and by_id[tea].user_id == "u1"
    assert by_id[tea].extra["memos_memory_type"] == "LongTermMemory"
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert all(0.0 <= m.score <= 1.0 for m in found)
    assert pref not in by_id

    # Preference memories come back in their own bucket; no agent: the profile cube only.
    prefs = await provider.search("t1", "u1", None, "tea sugar", top_k=5)
    assert state.calls("/product/search")[-1].body["readable_cube_ids"] == [PROFILE]
    assert {m.id: m.memory_type for m in prefs}[pref] == "pref_mem"


async def test_search_keeps_top_k_per_cube(memos: tuple[MemOSProvider, MemOSState]) -> None:
    provider, state = memos
    for i in range(4):
        state.seed(PROFILE, f"tea fact {i}")
        state.seed(PROFILE, f"tea preference {i}", bucket="pref_mem")
        state.seed(AGENT, f"tea skill {i}", bucket="skill_mem")
    found = await provider.search("t1", "u1", "a1", "tea", top_k=2)
    assert sorted(m.cube_id for m in found) == ["agent_a1"] * 2 + ["user_profile"] * 2


async def test_search_failures_raise_and_are_counted(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    state.seed(PROFILE, "green tea")
    path = "/product/search"

    state.envelope_error[path] = 500  # code 500 under HTTP 200
    before = failures("search")
    with pytest.raises(ProviderUnavailable, match="code 500"):
        await provider.search("t1", "u1", None, "green tea")
    assert failures("search") == before + 1
    assert len(state.calls(path)) == 2  # a 5xx code is worth one more try on search
    state.envelope_error.clear()

    state.envelope_error[path] = 400  # a refusal: not repeated
    with pytest.raises(ProviderUnavailable, match="code 400"):
        await provider.search("t1", "u1", None, "green tea")
    assert len(state.calls(path)) == 3
    state.envelope_error.clear()

    state.http_error[path] = 500
    with pytest.raises(ProviderUnavailable, match="HTTP 500"):
        await provider.search("t1", "u1", None, "green tea")
    state.http_error.clear()

    state.malformed.add(path)
    with pytest.raises(ProviderUnavailable, match="not an object"):
        await provider.search("t1", "u1", None, "green tea")
    state.malformed.clear()

    state.delay[path] = 2.0  # beyond a 0.5 s client timeout: cut off, and no retry either
    asked = len(state.calls(path))
    hasty = in_process(state, timeout=0.5)
    try:
        with pytest.raises(ProviderUnavailable, match=r"did not answer within 0\.5s"):
            await hasty.search("t1", "u1", None, "green tea")
    finally:
        await hasty.aclose()
    assert len(state.calls(path)) == asked + 1
    state.delay.clear()
    assert failures("search") == before + 5

    # Back to normal: the pooled client still works.
    assert [m.content for m in await provider.search("t1", "u1", None, "green tea")] == [
        "green tea"
    ]


async def test_search_retries_a_transient_failure(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    state.seed(PROFILE, "green tea")
    state.fail_next["/product/search"] = 1
    found = await provider.search("t1", "u1", None, "green tea")
    assert [m.content for m in found] == ["green tea"]
    assert len(state.calls("/product/search")) == 2


async def test_unreachable_server_raises() -> None:
    provider = MemOSProvider(f"http://127.0.0.1:{free_port()}", MEMOS_KEY, backoff_seconds=0.01)
    try:
        with pytest.raises(ProviderUnavailable, match="not reachable"):
            await provider.search("t1", "u1", None, "tea")
    finally:
        await provider.aclose()


async def test_api_key_is_never_logged_or_raised(
    memos: tuple[MemOSProvider, MemOSState], caplog: pytest.LogCaptureFixture
) -> None:
    provider, state = memos
    caplog.set_level(logging.DEBUG)
    state.fail_next["/product/search"] = 1
    state.http_error["/product/add"] = 401
    await provider.search("t1", "u1", None, "tea")
    with pytest.raises(ProviderUnavailable) as caught:
        await provider.add([new("The user likes tea")])
    assert MEMOS_KEY not in caplog.text
    assert MEMOS_KEY not in str(caught.value)
    assert MEMOS_KEY not in repr(provider) and MEMOS_KEY not in repr(provider.http)


# --- add -----------------------------------------------------------------------------------


async def test_add_is_sync_confirmed_and_never_duplicated(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    [item] = await provider.add([new("The user likes jazz", memory_type="pref_mem")])

    paths = [r.path for r in state.requests]
    # Idempotency check, the add, the confirmation read.
    assert paths == ["/product/search", "/product/add", "/product/search"]
    check = state.requests[0].body
    assert check["readable_cube_ids"] == [PROFILE] and check["relativity"] == 0.0
    assert check["query"] == "The user likes jazz" and check["dedup"] == "no"
    [add] = state.calls("/product/add")
    assert add.headers["authorization"] == f"Bearer {MEMOS_KEY}"
    assert add.body["user_id"] == "t1:u1"
    assert add.body["writable_cube_ids"] == [PROFILE]
    assert add.body["messages"] == [{"role": "user", "content": "The user likes jazz"}]
    assert add.body["async_mode"] == "sync" and add.body["mode"] == "fast"
    info = add.body["info"]
    assert info["memstream_tenant"] == "t1" and info["memstream_memory_type"] == "pref_mem"
    assert info["memstream_importance"] == 7 and info["memstream_source_event_ids"] == ["e1", "e2"]

    assert item.id in state.memories and "provisional" not in item.extra
    assert (item.cube_id, item.memory_type, item.content) == (
        "user_profile",
        "pref_mem",
        "The user likes jazz",
    )
    assert item.importance == 7 and item.source_event_ids == ("e1", "e2")

    # The same content again (other case and spacing): answered as stored, not added.
    state.requests.clear()
    [again] = await provider.add([new("  the USER likes   jazz ")])
    assert again.id == item.id
    assert not state.calls("/product/add")
    assert state.texts(PROFILE) == ["The user likes jazz"]

    # A batch repeating itself adds once; another cube is another memory.
    state.requests.clear()
    items = await provider.add(
        [new("Plays the piano"), new("plays the piano"), new("Plays the piano", cube="agent_a1")]
    )
    assert items[0].id == items[1].id != items[2].id
    assert len(state.calls("/product/add")) == 2
    assert state.texts(AGENT) == ["Plays the piano"]


async def test_async_temporary_ids_are_not_recorded_as_final(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    state.add_async = "moved"  # answers tmp-N, stores under mem-M
    [item] = await provider.add([new("The user lives in Lyon")])
    assert item.id.startswith("mem-") and item.id in state.memories
    [temporary] = item.extra["temporary_ids"]  # type: ignore[misc]
    assert str(temporary).startswith("tmp-")
    assert "provisional" not in item.extra

    state.add_async = "lost"  # answers tmp-N and never stores anything
    before = failures("add_confirm")
    [lost] = await provider.add([new("The user lives in Rome")])
    assert failures("add_confirm") == before + 1
    assert lost.extra["provisional"] is True
    assert lost.id.startswith("tmp-") and lost.extra["temporary_ids"] == [lost.id]
    # Confirmation tried right away and after each delay.
    assert len(state.calls("/product/search")) == 2 + 1 + 3


async def test_add_is_repeated_only_after_checking_the_cube(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    # The server stores the memory, then the reply is lost (503): no second add.
    state.store_then_fail = True
    [item] = await provider.add([new("The user speaks Dutch")])
    assert len(state.calls("/product/add")) == 1
    assert state.texts(PROFILE) == ["The user speaks Dutch"] and item.id in state.memories

    # The server fails before storing: checked again, then added once more.
    state.requests.clear()
    state.fail_next["/product/add"] = 1
    [item] = await provider.add([new("The user speaks Welsh")])
    assert [r.path for r in state.requests] == [
        "/product/search",
        "/product/add",
        "/product/search",
        "/product/add",
        "/product/search",
    ]
    assert state.texts(PROFILE) == ["The user speaks Dutch", "The user speaks Welsh"]

    # A refusal is not repeated.
    state.requests.clear()
    state.envelope_error["/product/add"] = 422
    with pytest.raises(ProviderUnavailable, match="code 422"):
        await provider.add([new("The user speaks Frisian")])
    assert len(state.calls("/product/add")) == 1


async def test_episodes_are_added_plain_and_keep_their_kind_and_date() -> None:
    state = MemOSState()
    # Even a provider told to let MemOS extract (``fine``) adds an episode as it is.
    provider = in_process(state, add_mode="fine", confirm_delays=(0.05,))
    said = datetime(2026, 4, 3, 20, 15, tzinfo=timezone(timedelta(hours=8)))
    try:
        [episode] = await provider.add(
            [
                new(
                    "On 3 April 2026 the user said they adopted a cat.",
                    kind="episode",
                    occurred_at=said,
                )
            ]
        )
        [fact] = await provider.add([new("The user has a cat.")])
    finally:
        await provider.aclose()
    first, second = state.calls("/product/add")
    assert first.body["mode"] == "fast" and second.body["mode"] == "fine"
    assert first.body["info"]["memstream_kind"] == "episode"
    assert first.body["info"]["memstream_occurred_at"] == "2026-04-03T12:15:00+00:00"
    assert "memstream_kind" not in second.body["info"]
    assert "memstream_occurred_at" not in second.body["info"]
    assert (episode.kind, episode.occurred_at) == ("episode", said)
    assert (fact.kind, fact.occurred_at) == ("fact", None)

    reader = in_process(state)
    try:
        hits = {m.id: m for m in await reader.search("t1", "u1", None, "the user cat")}
        listed = {m.id: m for m in await reader.list_live("t1", "u1", None)}
    finally:
        await reader.aclose()
    for found in (hits, listed):
        assert (found[episode.id].kind, found[episode.id].occurred_at) == ("episode", said)
        assert (found[fact.id].kind, found[fact.id].occurred_at) == ("fact", None)


async def test_add_refuses_bad_memories(memos: tuple[MemOSProvider, MemOSState]) -> None:
    provider, state = memos
    with pytest.raises(ValueError, match="cube_id"):
        await provider.add([new("x", cube="somewhere")])
    with pytest.raises(ValueError, match="empty"):
        await provider.add([new("   ")])
    with pytest.raises(ValueError, match="kind"):
        await provider.add([new("x", kind="rumour")])
    assert not state.requests


# --- delete and list -----------------------------------------------------------------------


async def test_delete_checks_owners_and_code_200_failures(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    mine = state.seed(PROFILE, "one")
    agent = state.seed(AGENT, "two")
    theirs = state.seed(memos_cube("t2", "u1", "user_profile"), "three")
    tricky = state.seed(memos_cube("t1:x", "u1", "user_profile"), "four")

    deleted = await provider.delete("t1", [mine, agent, theirs, tricky, "nope"])

    assert sorted(deleted) == sorted([mine, agent])
    [owners] = state.calls("/product/get_user_names_by_memory_ids")
    assert sorted(owners.body["memory_ids"]) == sorted([mine, agent, theirs, tricky, "nope"])
    bodies = sorted(
        (r.body for r in state.calls("/product/delete_memory")),
        key=lambda b: b["writable_cube_ids"],
    )
    assert bodies == [
        {"writable_cube_ids": [AGENT], "memory_ids": [agent]},
        {"writable_cube_ids": [PROFILE], "memory_ids": [mine]},
    ]
    assert set(state.memories) == {theirs, tricky}
    assert await provider.delete("t1", [mine]) == []  # gone: nothing to delete

    other = state.seed(PROFILE, "five")
    state.delete_failure = True
    before = failures("delete")
    with pytest.raises(ProviderUnavailable, match="refused to delete"):
        await provider.delete("t1", [other])
    assert failures("delete") == before + 1
    assert other in state.memories


async def test_list_live_and_delete_user(memos: tuple[MemOSProvider, MemOSState]) -> None:
    provider, state = memos
    old = state.seed(PROFILE, "old fact", age_seconds=100)
    new_ = state.seed(PROFILE, "new fact", age_seconds=1)
    pref = state.seed(PROFILE, "likes tea", bucket="pref_mem", age_seconds=50)
    agent = state.seed(AGENT, "agent fact", age_seconds=10)
    other_agent = state.seed(memos_cube("t1", "u1", "agent_a2"), "other agent fact")
    other_user = state.seed(memos_cube("t1", "u2", "user_profile"), "not mine")

    live = await provider.list_live("t1", "u1", "a1")
    assert [m.id for m in live] == [new_, agent, pref, old]  # newest first
    assert {m.id: m.memory_type for m in live}[pref] == "pref_mem"
    assert all(m.score == 1.0 for m in live)
    bodies = [r.body for r in state.calls("/product/get_memory")]
    assert sorted(b["mem_cube_id"] for b in bodies) == [AGENT, PROFILE]
    assert all(b["user_id"] == "t1:u1" for b in bodies)

    deleted = await provider.delete_user("t1", "u1")
    assert sorted(deleted) == sorted([old, new_, pref, agent, other_agent])
    assert set(state.memories) == {other_user}


async def test_list_falls_back_to_a_broad_search(
    memos: tuple[MemOSProvider, MemOSState],
) -> None:
    provider, state = memos
    state.no_get_memory = True
    first = state.seed(PROFILE, "a memory about tea", age_seconds=5)
    second = state.seed(PROFILE, "another memory", age_seconds=1)
    live = await provider.list_live("t1", "u1", None)
    assert [m.id for m in live] == [second, first]
    search = state.calls("/product/search")[-1].body
    assert search["relativity"] == 0.0 and search["top_k"] == provider.list_limit
    # Learned once: later lists go straight to the search.
    state.requests.clear()
    await provider.list_live("t1", "u1", None)
    assert not state.calls("/product/get_memory")


async def test_list_failure_raises(memos: tuple[MemOSProvider, MemOSState]) -> None:
    provider, state = memos
    state.envelope_error["/product/get_memory"] = 500
    with pytest.raises(ProviderUnavailable):
        await provider.list_live("t1", "u1", "a1")
