"""The warm layer's bookkeeping, no database: who becomes warm, what a full layer admits,
how fast loads may start, and the bound on what it holds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memstream.memory import USER_PROFILE, MemoryItem
from memstream.providers.builtin import warm
from memstream.providers.builtin.warm import WarmUsers, build


def entry(user: str, memories: int) -> warm.WarmUser:
    items = [
        MemoryItem(
            id=f"{user}-{i}",
            tenant_id="t",
            user_id=user,
            agent_id=None,
            cube_id=USER_PROFILE,
            memory_type="text_mem",
            content=f"The user likes cello concert number {i}.",
            importance=5,
            source_event_ids=(),
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        for i in range(memories)
    ]
    return build(1, [(item, 7) for item in items])


def test_a_user_becomes_warm_after_enough_searches() -> None:
    layer = WarmUsers(1_000, hot_after=3)
    assert [layer.noticed(("t", "u")) for _ in range(3)] == [False, False, True]
    assert WarmUsers(0, hot_after=1).noticed(("t", "u")) is False


def test_a_full_layer_admits_only_a_user_searched_more_than_the_one_it_drops() -> None:
    layer = WarmUsers(100, hot_after=2)
    layer.put(("t", "a"), entry("a", 50))
    layer.put(("t", "b"), entry("b", 50))
    for _ in range(3):  # "a", the least recently searched, was searched 3 times
        layer.hit(layer._entries[("t", "a")])
    assert [layer.noticed(("t", "c")) for _ in range(4)] == [False, False, False, True]


def test_loads_start_at_a_bounded_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(warm.time, "monotonic", lambda: now[0])
    layer = WarmUsers(1_000_000, hot_after=1)
    started = sum(layer.noticed(("t", f"u{i}")) for i in range(100))
    assert started == warm.LOAD_BURST
    now[0] += 1.0
    assert sum(layer.noticed(("t", f"v{i}")) for i in range(100)) == warm.LOADS_PER_SECOND


def test_the_layer_holds_at_most_its_memories_least_recently_searched_dropped() -> None:
    layer = WarmUsers(100)
    for user in ("a", "b", "c"):
        layer.put(("t", user), entry(user, 40))
    assert layer.memories == 80 and layer.get(("t", "a")) is None
    layer.put(("t", "big"), entry("big", 101))  # larger than the layer: never held
    assert layer.get(("t", "big")) is None and layer.memories == 80
    layer.drop("t")
    assert layer.memories == 0 and len(layer) == 0


def test_an_entry_leaves_out_terms_longer_than_the_posted_ones() -> None:
    long_word = "x" * 250  # past the stored terms' 200 characters: never posted
    user = entry("a", 2)
    item = replace(next(iter(user.items.values())), id="long", content=f"cello {long_word}")
    user = build(1, [*((i, 7) for i in user.items.values()), (item, 2)])
    assert long_word not in user.words and "cello" in user.words
    assert user.search([long_word], [USER_PROFILE], 10, 0.0, 0.85) == []
    found = user.search(["cello", long_word], [USER_PROFILE], 10, 0.0, 0.85)
    assert "long" in {m.id for m in found}
