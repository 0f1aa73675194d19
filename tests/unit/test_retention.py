from datetime import UTC, datetime, timedelta

from memstream.longterm.retention import expired_episodes
from memstream.memory import MemoryItem

NOW = datetime(2026, 6, 1, 12, 0)


def item(id: str, kind: str, stored_days_ago: float, aware: bool = False) -> MemoryItem:
    created = NOW - timedelta(days=stored_days_ago)
    if aware:
        created = created.replace(tzinfo=UTC)
    return MemoryItem(
        id=id,
        tenant_id="t",
        user_id="u",
        agent_id=None,
        cube_id="user_profile",
        memory_type="text_mem",
        content=id,
        importance=3,
        source_event_ids=(),
        created_at=created,
        kind=kind,  # type: ignore[arg-type]
    )


def test_old_episodes_expire_and_facts_never_do() -> None:
    live = [item("e-old", "episode", 400), item("e-new", "episode", 3), item("f-old", "fact", 900)]
    assert expired_episodes(live, NOW, retention=timedelta(days=365), cap=None) == ["e-old"]


def test_the_cap_keeps_the_newest_episodes() -> None:
    live = [item(f"e{i}", "episode", i) for i in range(5)] + [item("f", "fact", 10)]
    assert expired_episodes(live, NOW, retention=None, cap=3) == ["e3", "e4"]


def test_naive_and_aware_times_compare() -> None:
    live = [item("a", "episode", 30, aware=True), item("b", "episode", 1)]
    assert expired_episodes(live, NOW, retention=timedelta(days=7), cap=None) == ["a"]


def test_no_limits_expire_nothing() -> None:
    live = [item("e", "episode", 10_000)]
    assert expired_episodes(live, NOW, retention=None, cap=None) == []
