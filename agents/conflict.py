"""The conflict stage: plan each session against the live memories of its user, and apply the
plan (write new memories first, then expire the old), one session of a user after the other,
in the order they ended (``memstream.longterm.user_queue``): records with candidates, and the
placeholders, releases and wakes that keep that order (``memstream.streams.user_queues``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import cache, partial
from typing import Any, cast

import faust

from memstream import metrics, tracing
from memstream.agents.dedupe import read
from memstream.agents.persist import read as read_plan
from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord
from memstream.failure.classify import failure_reason
from memstream.longterm.conflict import LLMConflictResolver
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import Session, arrival_of, dumps, loads, session_of
from memstream.longterm.retention import Retention
from memstream.longterm.stages import persist, plan
from memstream.longterm.user_queue import Arrival, Outcomes, Stage, UserOrder, Waiting
from memstream.streams import delivery, services
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle, decoded, publish_dead_letter, retry_later
from memstream.streams.topics import lt_conflict, retry_policy
from memstream.streams.user_queues import wake_at
from memstream.tables.user_queues import user_queues

STAGE = "conflict"
waiting = Waiting()


@cache
def resolver() -> LLMConflictResolver | None:
    client = services.llm()
    return LLMConflictResolver(client) if client else None


async def apply(value: bytes, kept: bytes | None, keep: Callable[[bytes], Awaitable[None]]) -> None:
    """Plan the session (unless a plan was kept from an earlier try), keep the plan, apply it."""
    current, candidates, _ = read(value)
    with tracing.continued(STAGE, tracing.session_headers(current.trace)):
        await _apply(current, candidates, kept, keep)


async def _apply(
    current: Session,
    candidates: list[Candidate],
    kept: bytes | None,
    keep: Callable[[bytes], Awaitable[None]],
) -> None:
    if await services.forgotten_before(current.tenant_id, current.user_id, current.origin):
        metrics.EVENTS.labels(STAGE, "dropped_forgotten").inc()
        return
    provider = await services.router().for_agent(current.tenant_id, current.agent_id)
    if kept is None:
        verdict = await plan(current, candidates, provider, resolver())
        metrics.MEMORIES.labels("skipped").inc(verdict.skipped)
        if not (verdict.store or verdict.expire):
            return
        kept = dumps(session=current, store=verdict.store, expire=verdict.expire)
        await keep(kept)
    _, store, expire = read_plan(kept)
    retention = Retention.of(settings.episode_retention_days, settings.episode_max_per_user)
    overtaken = partial(
        services.overtaken, current.tenant_id, current.user_id, current.origin, STAGE
    )
    gone = await persist(provider, current, store, expire, retention, overtaken)
    metrics.MEMORIES.labels("stored").inc(len(store))
    metrics.MEMORIES.labels("expired").inc(len(gone))


def read_arrival(raw: bytes | None) -> tuple[Arrival, bytes | None]:
    """What a record means for its user's queue, and the user (None for a wake: its key)."""
    record = loads(raw or b"")
    arrival = arrival_of(record)
    if arrival.kind == "wake":
        return arrival, None
    if arrival.kind == "record":
        read(raw)  # a record the stage cannot apply is dead-lettered before it joins a queue
    return arrival, session_of(record).owner_key


async def resend(head: SourceRecord) -> None:
    await delivery.send_durably(lt_conflict, head.key, head.value)


async def handle(source: SourceRecord) -> Outcomes:
    arrival, owner = decoded(read_arrival, source)
    owner = owner or source.key
    if owner is None:
        raise InvalidEvent("invalid_payload", "A wake for no user's queue (the record has no key).")
    order = UserOrder(user_queues, owner, now=time.time(), remember=retry_policy.horizon)
    stage = Stage(
        apply,
        classify=failure_reason,
        retry=partial(retry_later, STAGE),
        dead_letter=partial(publish_dead_letter, STAGE),
        resend=resend,
        flush=app.producer.flush,
        wake=partial(wake_at, owner),
    )
    outcomes = await order.settle(arrival, source, stage)
    topic = lt_conflict.get_topic_name()
    held = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}
    for state, users in waiting.update(
        owner, source.partition, order.waiting_state(), held
    ).items():
        metrics.SESSION_ORDER_WAITING.labels(state).set(users)
    return outcomes


@app.agent(lt_conflict)
async def conflict(stream: faust.StreamT[Any]) -> None:
    settle = Settle(STAGE, stream)
    # Acknowledged here once settled; a record's outcomes are those of the queue it drained.
    events = cast("faust.Stream[Any]", settle.stream.noack())
    settle.stream = events
    async for event in events.events():
        try:
            with tracing.consumed(STAGE, event.message.headers):
                outcomes = await handle(delivery.source_of(event))
        except Exception as exc:
            await settle.failed([event], exc)
            continue
        await events.ack(event)
        for outcome, count in outcomes.counts.items():
            metrics.RECORDS.labels(STAGE, outcome).inc(count)
        for happened, count in outcomes.order.items():
            metrics.SESSION_ORDER.labels(happened).inc(count)
