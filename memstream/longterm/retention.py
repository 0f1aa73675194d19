"""Which episodes have outlived their retention: older than the retention period, or beyond
the per-user cap (oldest first). Facts are never expired here: only a newer fact does that."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstream.memory import MemoryItem


@dataclass(frozen=True, slots=True)
class Retention:
    """How long episodes are kept (from when they were stored) and how many per user."""

    period: timedelta | None = None
    per_user: int | None = None

    @classmethod
    def of(cls, days: int, per_user: int) -> Retention:
        """From the settings' numbers, where 0 turns a limit off."""
        return cls(timedelta(days=days) if days else None, per_user or None)


def expired_episodes(
    live: Sequence[MemoryItem], now: datetime, *, retention: timedelta | None, cap: int | None
) -> list[str]:
    """Ids of the episodes to expire. Age counts from when an episode was stored, so a backfill
    of old conversations keeps its episodes for the whole retention period."""
    episodes = sorted(
        (m for m in live if m.kind == "episode"),
        key=lambda m: (_utc(m.created_at), _utc(m.occurred_at or m.created_at), m.id),
        reverse=True,
    )
    now = _utc(now)
    doomed: list[str] = []
    for rank, item in enumerate(episodes):
        too_many = cap is not None and rank >= cap
        too_old = retention is not None and now - _utc(item.created_at) > retention
        if too_many or too_old:
            doomed.append(item.id)
    return doomed


def _utc(moment: datetime) -> datetime:
    # Stores answer naive UTC (the record) or aware times (MemOS, Mem0): compare them as aware.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
