"""The embedding backfill: vectors for the built-in store's memories, filled in after they were
written (memstream.embeddings.backfill). Registered only when an embeddings endpoint is set;
it runs on the group's leader alone, so workers never embed the same memories twice."""

from __future__ import annotations

import asyncio
from functools import cache

from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.streams import services
from memstream.streams.app import app, settings

TICK_SECONDS = 1.0


@cache
def backfill() -> EmbeddingBackfill | None:
    client = EmbeddingClient.from_settings(settings)
    return None if client is None else EmbeddingBackfill(services.resources().engine, client)


if settings.embedding_base_url.strip():

    @app.task  # type: ignore[untyped-decorator]
    async def embed_memories() -> None:
        """A loop with its own pacing rather than a Faust timer: a tick that embeds a large
        backlog takes longer than the interval, and a timer would warn on every one. The next
        tick starts right away while the last one found work, a second later when it did not
        (or on a worker that is not the group's leader)."""
        job = backfill()
        while job is not None:
            busy = False
            if app.is_leader():
                result = await job.tick()
                busy = result.error is None and (result.stored + result.refused) > 0
            await asyncio.sleep(0 if busy else TICK_SECONDS)
