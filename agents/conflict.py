"""The conflict stage: plan each session against the live memories of its user, and apply the
plan (write new memories first, then expire the old), one session of a user after the other
(``memstream.longterm.user_queue``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import cache, partial
from typing import Any, cast

import faust

from memstream import metrics
from memstream.agents.dedupe import read
from memstream.agents.persist import read as read_plan
from memstream.events.deadletter import SourceRecord
from memstream.failure.classify import failure_reason
from memstream.longterm.conflict import LLMConflictResolver
from memstream.longterm.payloads import dumps
from memstream.longterm.retention import Retention
from memstream.longterm.stages import persist, plan
from memstream.longterm.user_queue import Admission, Outcomes, UserOrder
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle, decoded, publish_dead_letter, retry_later
from memstream.streams.topics import lt_conflict, retry_policy
from memstream.tables.order import user_queues

STAGE = "conflict"


@cache
def resolver() -> LLMConflictResolver | None:
    client = shared.llm()
    return LLMConflictResolver(client) if client else None


async def apply(value: bytes, kept: bytes | None, keep: Callable[[bytes], Awaitable[None]]) -> None:
    """Plan the session (unless a plan was kept from an earlier try), keep the plan, apply it."""
    current, candidates = read(value)
    provider = await shared.router().for_agent(current.tenant_id, current.agent_id)
    if kept is None:
        verdict = await plan(current, candidates, provider, resolver())
        metrics.MEMORIES.labels("skipped").inc(verdict.skipped)
        if not (verdict.store or verdict.expire):
            return
        kept = dumps(session=current, store=verdict.store, expire=verdict.expire)
        await keep(kept)
    _, store, expire = read_plan(kept)
    retention = Retention.of(settings.episode_retention_days, settings.episode_max_per_user)
    gone = await persist(provider, current, store, expire, retention)
    metrics.MEMORIES.labels("stored").inc(len(store))
    metrics.MEMORIES.labels("expired").inc(len(gone))


async def handle(source: SourceRecord) -> Outcomes:
    current, _ = decoded(read, source)
    order = UserOrder(
        user_queues, current.owner_key, now=time.time(), remember=retry_policy.horizon
    )
    admission = order.admit(source)
    if admission is not Admission.HEAD:
        # Queued behind an earlier record of the user, or known already: nothing to do now.
        return Outcomes({"held" if admission is Admission.QUEUED else "finished": 1})
    return await order.drain(
        apply,
        classify=failure_reason,
        retry=partial(retry_later, STAGE),
        dead_letter=partial(publish_dead_letter, STAGE),
        resend=lambda head: shared.send_durably(lt_conflict, head.key, head.value),
        flush=app.producer.flush,
    )


@app.agent(lt_conflict)
async def conflict(stream: faust.StreamT[Any]) -> None:
    settle = Settle(STAGE, stream)
    # Acknowledged here once settled; a record's outcomes are those of the queue it drained.
    events = cast("faust.Stream[Any]", settle.stream.noack())
    settle.stream = events
    async for event in events.events():
        try:
            outcomes = await handle(shared.source_of(event))
        except Exception as exc:
            await settle.failed([event], exc)
            continue
        await events.ack(event)
        for outcome, count in outcomes.counts.items():
            metrics.RECORDS.labels(STAGE, outcome).inc(count)
