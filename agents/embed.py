"""The embedding backfill: vectors for the built-in store's memories, filled in after they were
written (memstream.embeddings.backfill). Registered only when an embeddings endpoint is set;
it runs on the group's leader alone, so workers never embed the same memories twice."""

from __future__ import annotations

from functools import cache

from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.streams import shared
from memstream.streams.app import app, settings

TICK_SECONDS = 1.0


@cache
def backfill() -> EmbeddingBackfill | None:
    client = EmbeddingClient.from_settings(settings)
    return None if client is None else EmbeddingBackfill(shared.resources().engine, client)


if settings.embedding_base_url.strip():

    @app.timer(interval=TICK_SECONDS, on_leader=True)  # type: ignore[untyped-decorator]
    async def embed_memories() -> None:
        job = backfill()
        if job is not None:
            await job.tick()
