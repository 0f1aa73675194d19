"""The persist stage: write new memories first, then expire the old ones, for plans made by the
conflict stage of earlier versions (which handed them over on ``lt-persist``) and their dead
letters sent back by ``memstream redrive``. The conflict stage now applies its own plans, one
session of a user after the other."""

from __future__ import annotations

from functools import partial
from typing import Any

import faust

from memstream import metrics
from memstream.events.deadletter import SourceRecord
from memstream.longterm.payloads import Session, loads, memories_of, session_of
from memstream.longterm.retention import Retention
from memstream.longterm.stages import persist as persist_plan
from memstream.memory import NewMemory
from memstream.streams import services
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_persist

STAGE = "persist"
Writes = tuple[Session, list[NewMemory], list[str]]


def read(raw: bytes | None) -> Writes:
    record = loads(raw or b"")
    expire = record["expire"]
    if not isinstance(expire, list) or not all(isinstance(i, str) for i in expire):
        raise TypeError("expire is not a list of memory ids")
    return session_of(record), memories_of(record), expire


async def handle(writes: Writes, source: SourceRecord) -> None:
    current, store, expire = writes
    if await services.forgotten_before(current.tenant_id, current.user_id, current.origin):
        metrics.EVENTS.labels(STAGE, "dropped_forgotten").inc()
        return
    provider = await services.router().for_agent(current.tenant_id, current.agent_id)
    retention = Retention.of(settings.episode_retention_days, settings.episode_max_per_user)
    overtaken = partial(
        services.overtaken, current.tenant_id, current.user_id, current.origin, STAGE
    )
    gone = await persist_plan(provider, current, store, expire, retention, overtaken)
    metrics.MEMORIES.labels("stored").inc(len(store))
    metrics.MEMORIES.labels("expired").inc(len(gone))


@app.agent(lt_persist)
async def persist(stream: faust.StreamT[Any]) -> None:
    await Settle(STAGE, stream).every_record(read, handle)
