"""The term backfill: lexical postings for memories that reached ``long_term_memory`` without
memstream's writers (an import by SQL, rows written before the postings existed), so they
become searchable within seconds (memstream.store.postings). It runs on the
group's leader alone, so workers never index the same memories twice."""

from __future__ import annotations

import asyncio
import logging
from functools import cache

from memstream.store.postings import TermBackfill
from memstream.streams import services
from memstream.streams.app import app

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0


@cache
def backfill() -> TermBackfill:
    return TermBackfill(services.resources().engine)


@app.task  # type: ignore[untyped-decorator]
async def index_terms() -> None:
    """Its own pacing, like the embedding backfill: right away again while a tick found work
    (a large import), every few seconds when it did not."""
    while True:
        busy = False
        if app.is_leader():
            try:
                busy = await backfill().tick() > 0
            except Exception as exc:  # the database is down: try again next tick
                log.warning("term backfill cannot index memories: %r", exc)
        await asyncio.sleep(0 if busy else TICK_SECONDS)
