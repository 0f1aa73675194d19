"""The built-in store's short-lived cache of lexical answers: what it keeps, for how long, what
a write of this process drops, and the bytes it holds at most."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstream.memory import MemoryItem
from memstream.providers.builtin import index_cache
from memstream.providers.builtin.index_cache import RecentSearches, search_terms
from memstream.retrieval import QUERY_TERMS, query_terms
from memstream.store.schema import TERM_CHARS


def item(memory_id: str) -> MemoryItem:
    return MemoryItem(
        id=memory_id,
        tenant_id="t",
        user_id="u",
        agent_id=None,
        cube_id="user_profile",
        memory_type="text_mem",
        content="The user plays the cello.",
        importance=5,
        source_event_ids=(),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(index_cache.time, "monotonic", clock)
    return clock


def test_an_answer_is_reused_for_its_fresh_time_only(clock: Clock) -> None:
    recent = RecentSearches(1.0)
    key = ("t", "u", None, ("cello",), 10)
    recent.put(key, [item("m1")])
    clock.now += 0.9
    assert [m.id for m in recent.get(key) or []] == ["m1"]
    clock.now += 0.2
    assert recent.get(key) is None


def test_nothing_is_kept_without_a_fresh_time(clock: Clock) -> None:
    recent = RecentSearches(0.0)
    recent.put(("t", "u", None, ("cello",), 10), [item("m1")])
    assert recent.get(("t", "u", None, ("cello",), 10)) is None


def test_a_write_drops_its_user_and_a_delete_by_id_the_tenant(clock: Clock) -> None:
    recent = RecentSearches(30.0)
    keys = [
        ("t", "u", None, ("q",), 10),
        ("t", "v", None, ("q",), 10),
        ("s", "u", None, ("q",), 10),
    ]
    for key in keys:
        recent.put(key, [item("m1")])
    recent.drop("t", "u")
    assert [recent.get(k) is not None for k in keys] == [False, True, True]
    recent.drop("t")
    assert [recent.get(k) is not None for k in keys] == [False, False, True]


def test_the_least_recently_used_answer_goes_first(clock: Clock) -> None:
    a, b, c = (("t", "u", None, (q,), 10) for q in "abc")
    recent = RecentSearches(30.0, max_bytes=2 * index_cache._cost(a, []))
    recent.put(a, [])
    recent.put(b, [])
    assert recent.get(a) == []  # a used last: b goes
    recent.put(c, [])
    assert recent.get(b) is None and recent.get(a) == [] and recent.get(c) == []


def test_long_queries_are_held_within_the_bytes_bound(clock: Clock) -> None:
    recent = RecentSearches(30.0, max_bytes=1_000_000)
    for n in range(2_000):
        # Each query as long as a request may be (32,768 characters of emoji), cut as a
        # search cuts it: at most QUERY_TERMS terms, the over-long ones standing for nothing.
        tokens = [f"w{n}x{i}" for i in range(200)] + ["\U0001f600" * 32_768]
        terms = search_terms(query_terms(tokens), TERM_CHARS)
        assert len(terms) <= QUERY_TERMS
        recent.put(("t", f"u{n % 7}", None, terms, 10), [item(f"m{n}")])
        assert recent.bytes <= 1_000_000
    assert 0 < len(recent) < 2_000
    recent.drop("t")
    assert len(recent) == 0 and recent.bytes == 0


def test_over_long_terms_share_one_key_and_an_answer_too_big_is_not_kept(clock: Clock) -> None:
    assert search_terms(["cello", "x" * 100, "tea"], 64) == search_terms(
        ["cello", "y" * 70, "tea"], 64
    )
    assert search_terms(["cello"], 64) != search_terms(["cello", "x" * 100], 64)
    recent = RecentSearches(30.0, max_bytes=2_000)
    key = ("t", "u", None, ("cello",), 10)
    recent.put(key, [item(f"m{i}") for i in range(10)])
    assert recent.get(key) is None and recent.bytes == 0
