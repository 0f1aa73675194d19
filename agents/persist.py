"""The persist stage: write new memories first, then expire the old ones."""

from __future__ import annotations

from typing import Any

import faust

from memstream import metrics
from memstream.agents.retry import fail
from memstream.longterm.payloads import loads, memories_of, session_of
from memstream.longterm.stages import persist as persist_plan
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.topics import lt_persist

STAGE = "persist"


@app.agent(lt_persist)
async def persist(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        record = loads(event.message.value)
        attempt = int(record.pop("attempt", 0))
        current = session_of(record)
        store, expire = memories_of(record), list(record["expire"])
        try:
            provider = await shared.router().for_agent(current.tenant_id, current.agent_id)
            await persist_plan(provider, current, store, expire)
        except Exception as exc:
            # Nothing is lost while the provider is down: the record waits on the retry topic.
            await fail(STAGE, event, record, attempt, exc)
            continue
        metrics.MEMORIES.labels("stored").inc(len(store))
        metrics.MEMORIES.labels("expired").inc(len(expire))
