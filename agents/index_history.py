"""The turn index: postings of the stored chat turns, which the built-in store's search falls
back to where memories cannot answer (memstream.store.turns). It runs on the
group's leader alone and reads what the history stage wrote, so ingest pays nothing for it."""

from __future__ import annotations

import asyncio
import logging
from functools import cache

from memstream.store.turns import HistoryIndex
from memstream.streams import services
from memstream.streams.app import app

log = logging.getLogger(__name__)

TICK_SECONDS = 2.0


@cache
def index() -> HistoryIndex:
    return HistoryIndex(services.resources().engine)


@app.task  # type: ignore[untyped-decorator]
async def index_history() -> None:
    """Right away again while a tick found work (a backlog), every few seconds when not."""
    while True:
        busy = False
        if app.is_leader():
            try:
                busy = await index().tick() > 0
            except Exception as exc:  # the database is down: try again next tick
                log.warning("turn index cannot read the stored messages: %r", exc)
        await asyncio.sleep(0 if busy else TICK_SECONDS)
