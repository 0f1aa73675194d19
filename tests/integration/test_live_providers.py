"""The MemOS and Mem0 providers against real servers, when there are any: set
``MEMSTREAM_MEMOS_URL`` (and ``MEMSTREAM_MEMOS_API_KEY``) or ``MEMSTREAM_MEM0_URL`` (and
``MEMSTREAM_MEM0_API_KEY``). Without them these tests skip, saying which variable is missing.

Each test writes under a fresh tenant and user, checks the round trip (add, idempotent re-add,
search, list, delete, forget) and cleans up after itself."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from memstream.memory import MemoryItem, NewMemory
from memstream.providers.base import LongTermProvider
from memstream.providers.mem0 import Mem0Provider
from memstream.providers.memos import MemOSProvider
from tests.support.settings import unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def _env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.skip(f"{name} is not set: no live server to test against")
    return value


@pytest.fixture
async def live_memos() -> AsyncIterator[MemOSProvider]:
    url = _env("MEMSTREAM_MEMOS_URL")

    async def agents_of(tenant_id: str) -> list[str]:
        return ["live-agent"]

    provider = MemOSProvider(
        url,
        os.environ.get("MEMSTREAM_MEMOS_API_KEY", ""),
        timeout=30,
        write_timeout=120,
        relativity=0.0,
        agents_of=agents_of,
    )
    yield provider
    await provider.aclose()


@pytest.fixture
async def live_mem0() -> AsyncIterator[Mem0Provider]:
    url = _env("MEMSTREAM_MEM0_URL")
    provider = Mem0Provider(
        url, os.environ.get("MEMSTREAM_MEM0_API_KEY", ""), timeout=30, relativity=0.0
    )
    yield provider
    await provider.aclose()


async def _eventually(
    check: Callable[[], Awaitable[list[MemoryItem]]], wanted: Callable[[list[MemoryItem]], bool]
) -> list[MemoryItem]:
    """Real servers index asynchronously (vector stores, MemOS schedulers): poll a while."""
    found: list[MemoryItem] = []

    async def seen() -> bool:
        nonlocal found
        found = await check()
        return wanted(found)

    try:
        await eventually(seen, within=30, what="the provider's answer")
    except TimeoutError:
        raise AssertionError(f"not seen in time; last answer: {found!r}") from None
    return found


async def _round_trip(provider: LongTermProvider) -> None:
    tenant, user, agent = unique("live-tenant"), unique("live-user"), "live-agent"

    def memory(content: str, cube: str, **extra: Any) -> NewMemory:
        return NewMemory(tenant, user, agent, cube, "text_mem", content, 6, ("live-e1",), **extra)

    try:
        profile, agent_item = await provider.add(
            [
                memory("The user's favourite drink is jasmine tea", "user_profile"),
                memory("The agent recommends teahouses in Kyoto", f"agent_{agent}"),
            ]
        )
        assert profile.cube_id == "user_profile" and agent_item.cube_id == f"agent_{agent}"
        assert "provisional" not in profile.extra, "the server answered temporary ids"

        # Re-adding the same content answers the stored memory.
        [again] = await provider.add(
            [memory("the user's favourite drink is Jasmine Tea ", "user_profile")]
        )
        assert again.id == profile.id

        found = await _eventually(
            lambda: provider.search(tenant, user, agent, "favourite drink jasmine tea", top_k=5),
            lambda items: profile.id in {m.id for m in items},
        )
        assert all(0.0 <= m.score <= 1.0 for m in found)
        assert all(m.tenant_id == tenant and m.user_id == user for m in found)

        live = await provider.list_live(tenant, user, agent)
        assert {profile.id, agent_item.id} <= {m.id for m in live}

        # Another tenant can neither see nor delete these memories.
        assert await provider.delete(unique("other-tenant"), [profile.id]) == []
        assert await provider.search(unique("other-tenant"), user, agent, "jasmine tea") == []

        assert await provider.delete(tenant, [agent_item.id]) == [agent_item.id]
        live = await provider.list_live(tenant, user, agent)
        assert agent_item.id not in {m.id for m in live}
    finally:
        await provider.delete_user(tenant, user)
    assert await provider.list_live(tenant, user, agent) == []


async def test_live_memos_round_trip(live_memos: MemOSProvider) -> None:
    await _round_trip(live_memos)


async def test_live_mem0_round_trip(live_mem0: Mem0Provider) -> None:
    await _round_trip(live_mem0)
