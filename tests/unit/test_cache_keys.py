"""A conversation's cache keys share one Redis Cluster slot whatever its ids hold."""

from __future__ import annotations

import pytest
import redis.asyncio as redis
from pydantic import ValidationError
from redis.crc import key_slot

from memstream.settings import Settings
from memstream.store.cache import RedisCache

IDS = [
    ("t1", "c1"),
    ("tenant{x}", "conv}{"),
    ("{", "}"),
    ("a:b", "c"),
    ("a", "b:c"),
    ("", ""),
    ("ünï", "çødé"),
]


@pytest.fixture
def cache() -> RedisCache:
    return RedisCache(redis.Redis(), prefix="memstream:")


@pytest.mark.parametrize(("tenant", "conversation"), IDS)
def test_the_messages_and_summary_keys_share_a_slot(
    cache: RedisCache, tenant: str, conversation: str
) -> None:
    messages = cache.key(tenant, conversation).encode()
    summary = cache.summary_key(tenant, conversation).encode()
    assert messages != summary
    assert key_slot(messages) == key_slot(summary)


def test_keys_of_different_conversations_differ_and_spread_over_slots(cache: RedisCache) -> None:
    keys = {cache.key(t, c) for t, c in IDS} | {cache.key("a:b", "c"), cache.key("a", "b:c")}
    assert len(keys) == len(IDS)
    slots = {key_slot(cache.key("t", f"c{n}").encode()) for n in range(100)}
    assert len(slots) > 90


def test_a_prefix_with_a_brace_is_refused() -> None:
    with pytest.raises(ValidationError, match="must not contain"):
        Settings(cache_prefix="memstream{x}:")
