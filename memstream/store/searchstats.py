"""Load-path long-term search statistics, kept off the load path.

``record`` only adds to an in-memory aggregate per (tenant, minute): a dict lookup and a few
integer additions, no I/O. A background task flushes the aggregates every few seconds in one
multi-row upsert into ``search_stat`` that adds to the stored counts, so any number of API
processes can write the same rows. A flush that fails keeps its counts for the next one;
memory is bounded by ``max_pending`` (tenant, minute) pairs, beyond which records are
dropped and counted.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Insert
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import search_stat

log = logging.getLogger(__name__)

# Upper bounds (seconds) of the latency histogram columns of ``search_stat``, in order; the
# last column (``le_inf``) counts everything slower.
LATENCY_BOUNDS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
LATENCY_BUCKETS: tuple[str, ...] = (
    "le_1ms",
    "le_2_5ms",
    "le_5ms",
    "le_10ms",
    "le_25ms",
    "le_50ms",
    "le_100ms",
    "le_250ms",
    "le_500ms",
    "le_1s",
    "le_inf",
)
_ADDED = ("searches", "hits", "latency_seconds_sum", *LATENCY_BUCKETS)


@dataclass(slots=True)
class _Aggregate:
    searches: int = 0
    hits: int = 0
    seconds: float = 0.0
    latency: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))

    def merge(self, other: _Aggregate) -> None:
        self.searches += other.searches
        self.hits += other.hits
        self.seconds += other.seconds
        self.latency = [a + b for a, b in zip(self.latency, other.latency, strict=True)]


def latency_quantile(counts: Sequence[int], q: float) -> float | None:
    """The upper bound (seconds) of the histogram bucket holding quantile ``q``; the slowest
    bucket answers its lower bound (1 s). None without searches."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, count in enumerate(counts):
        seen += count
        if count and seen >= rank:
            return LATENCY_BOUNDS[min(i, len(LATENCY_BOUNDS) - 1)]
    return LATENCY_BOUNDS[-1]


def _minute(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch - epoch % 60, UTC).replace(tzinfo=None)


class SearchStats:
    """In-memory per-minute aggregates of long-term searches, flushed to ``search_stat``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        flush_seconds: float = 5.0,
        max_pending: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._flush_seconds = flush_seconds
        self._max_pending = max_pending
        self._clock = clock
        self._pending: dict[tuple[str, datetime], _Aggregate] = {}
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def record(self, tenant_id: str, seconds: float, hits: int) -> None:
        """Count one search; never blocks, never raises for a full buffer (drops instead)."""
        key = (tenant_id, _minute(self._clock()))
        agg = self._pending.get(key)
        if agg is None:
            if len(self._pending) >= self._max_pending:
                self.dropped += 1
                return
            agg = self._pending[key] = _Aggregate()
        agg.searches += 1
        agg.hits += hits
        agg.seconds += seconds
        agg.latency[bisect.bisect_left(LATENCY_BOUNDS, seconds)] += 1

    def _upsert(self) -> Insert:
        if self._engine.dialect.name == "sqlite":
            lite = sqlite.insert(search_stat)
            return lite.on_conflict_do_update(
                index_elements=[search_stat.c.tenant_id, search_stat.c.bucket_start],
                set_={name: search_stat.c[name] + lite.excluded[name] for name in _ADDED},
            )
        my = mysql.insert(search_stat)
        return my.on_duplicate_key_update(
            {name: search_stat.c[name] + my.inserted[name] for name in _ADDED}
        )

    async def flush(self) -> int:
        """Write the pending aggregates (one statement); answers the rows written. On failure
        the counts are kept for the next flush and the error is raised."""
        if not self._pending:
            return 0
        batch, self._pending = self._pending, {}
        rows: list[dict[str, Any]] = []
        for (tenant_id, bucket_start), agg in sorted(batch.items()):
            row: dict[str, Any] = {
                "tenant_id": tenant_id,
                "bucket_start": bucket_start,
                "searches": agg.searches,
                "hits": agg.hits,
                "latency_seconds_sum": agg.seconds,
            }
            row.update(zip(LATENCY_BUCKETS, agg.latency, strict=True))
            rows.append(row)
        try:
            async with self._engine.begin() as conn:
                await conn.execute(self._upsert(), rows)
        except BaseException:
            for key, agg in batch.items():
                kept = self._pending.setdefault(key, _Aggregate())
                kept.merge(agg)
            raise
        return len(rows)

    def start(self) -> None:
        """Start the background flusher (needs a running event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="search-stats-flusher")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._flush_seconds)
            try:
                await self.flush()
            except Exception as exc:
                log.warning("search stats not flushed (kept for the next try): %r", exc)

    async def close(self) -> None:
        """Stop the flusher and write what is pending, once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as exc:
            log.warning("search stats lost at shutdown: %r", exc)
