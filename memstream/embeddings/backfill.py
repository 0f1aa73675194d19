"""Vectors for the built-in store's memories, filled in after they were written.
Why it works this way: docs/design/embeddings-backfill.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prometheus_client import Counter
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.embeddings.client import EmbeddingClient
from memstream.errors import EmbeddingError
from memstream.store import embeddings as vector_rows
from memstream.store import vector_blocks

log = logging.getLogger(__name__)

EMBEDDED = Counter(
    "memstream_memory_embeddings_total",
    "Memories the embedding backfill handled, by outcome (stored, refused, failed).",
    ["outcome"],
)

# A text every endpoint embeds: answering it shows the endpoint is up.
PROBE = "memory"

Position = tuple[datetime, str]  # (created_at, id) of the last memory handled
Pending = vector_rows.Lacking


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one tick did: vectors stored, memories refused, and the failure that ended it."""

    stored: int = 0
    refused: int = 0
    error: str | None = None
    packed: int = 0  # vectors packed into their users' search blocks


class EmbeddingBackfill:
    """Stores a vector for every live memory of ``long_term_memory`` that lacks one."""

    def __init__(
        self,
        engine: AsyncEngine,
        client: EmbeddingClient,
        *,
        per_tick: int | None = None,
        lookback_seconds: float = 300.0,
        sweep_seconds: float = 3600.0,
        tenant_id: str | None = None,
        max_pause_seconds: float = 60.0,
    ) -> None:
        self._engine = engine
        self.tenant_id = tenant_id  # only this tenant's memories (an import, a benchmark)
        self.client = client
        self.per_tick = per_tick or 4 * client.batch_size
        self.lookback = timedelta(seconds=lookback_seconds)
        self.sweep_seconds = sweep_seconds
        self._position: Position | None = None  # None: from the first memory ever written
        self._swept_at = time.monotonic()
        self.max_pause = max_pause_seconds
        self._failures = 0  # ticks failed in a row
        self._refused: set[str] = set()  # fresh memories the endpoint refused, until a sweep
        self._resume_at = 0.0  # monotonic time before which ticks do nothing

    async def tick(self) -> TickResult:
        """Embed the next memories lacking a vector; never raises for the endpoint or the
        database (a later tick tries again)."""
        now = time.monotonic()
        if now < self._resume_at:
            return TickResult(error="paused after a failure")
        if now - self._swept_at >= self.sweep_seconds:
            self._position, self._swept_at = None, now
            self._refused.clear()
        result = await self._tick()
        try:
            # What this tick stored, and any vector stored another way (by SQL, before the
            # blocks existed), packed for search.
            packed = await vector_blocks.pack(self._engine, tenant_id=self.tenant_id)
        except Exception as exc:
            log.warning("embedding backfill cannot pack vectors: %r", exc)
            packed = 0
            if result.error is None:
                result = TickResult(result.stored, result.refused, repr(exc))
        result = TickResult(result.stored, result.refused, result.error, packed)
        if result.error is None:
            self._failures = 0
        else:
            self._failures += 1
            pause = min(self.max_pause, 2.0 ** (self._failures - 1))
            self._resume_at = time.monotonic() + pause
        return result

    async def _tick(self) -> TickResult:
        try:
            fresh = await self._fresh()
            pending = fresh or await self._pending()
        except Exception as exc:
            log.warning("embedding backfill cannot read memories: %r", exc)
            return TickResult(error=repr(exc))
        if not pending:
            self._rewind()
            return TickResult()
        stored = refused = 0
        for start in range(0, len(pending), self.client.batch_size):
            batch = pending[start : start + self.client.batch_size]
            try:
                done, skipped = await self._embed(batch)
            except Exception as exc:
                EMBEDDED.labels("failed").inc(len(batch))
                log.warning("embedding backfill stopped, tried again later: %s", exc)
                return TickResult(stored, refused, str(exc))
            stored += done
            refused += len(skipped)
            if fresh:  # the walk through the backlog stays where it was
                self._refused.update(skipped)
                continue
            last = batch[-1]
            self._position = (last.created_at, last.id)
        return TickResult(stored, refused)

    async def run_until_done(self, *, max_ticks: int = 1_000_000) -> TickResult:
        """Tick until nothing is left or a tick fails (benchmarks, tests, an import)."""
        stored = refused = packed = 0
        for _ in range(max_ticks):
            result = await self.tick()
            stored += result.stored
            refused += result.refused
            packed += result.packed
            if result.error is not None or not (result.stored or result.refused or result.packed):
                return TickResult(stored, refused, result.error, packed)
        return TickResult(stored, refused, None, packed)

    async def _fresh(self) -> Sequence[Pending]:
        """Memories written in the last ``lookback`` that lack a vector, but those refused."""
        since = datetime.now(UTC).replace(tzinfo=None) - self.lookback
        async with self._engine.connect() as conn:
            return await vector_rows.lacking(
                conn,
                self.client.model,
                self.per_tick,
                tenant_id=self.tenant_id,
                since=since,
                refused=sorted(self._refused),
            )

    async def _pending(self) -> Sequence[Pending]:
        """The next memories after the position that lack a vector of the model."""
        async with self._engine.connect() as conn:
            return await vector_rows.lacking(
                conn,
                self.client.model,
                self.per_tick,
                tenant_id=self.tenant_id,
                after=self._position,
            )

    async def _embed(self, batch: Sequence[Pending]) -> tuple[int, list[str]]:
        """Store the batch's vectors: how many, and the ids of the memories the endpoint
        refused. Raises when the endpoint is down."""
        try:
            vectors = [*await self.client.embed([row.content for row in batch])]
            keep = list(batch)
        except EmbeddingError:
            # Down, or refusing one of the texts? A probe tells: down raises again here.
            await self.client.embed_one(PROBE)
            keep, vectors = [], []
            for row in batch:
                try:
                    vectors.append(await self.client.embed_one(row.content))
                except EmbeddingError as exc:
                    log.warning("the embeddings endpoint refuses memory %s: %s", row.id, exc)
                else:
                    keep.append(row)
        rows = [
            vector_rows.VectorRow(row.id, row.tenant_id, row.user_id, vector)
            for row, vector in zip(keep, vectors, strict=True)
        ]
        async with self._engine.begin() as conn:
            await vector_rows.store(conn, self.client.model, rows)
        kept = {row.id for row in keep}
        refused = [row.id for row in batch if row.id not in kept]
        EMBEDDED.labels("stored").inc(len(rows))
        if refused:
            EMBEDDED.labels("refused").inc(len(refused))
        return len(rows), refused

    def _rewind(self) -> None:
        """Caught up: next time, look again at what was written in the last few minutes."""
        back = datetime.now(UTC).replace(tzinfo=None) - self.lookback
        if self._position is None or self._position[0] > back:
            self._position = (back, "")
