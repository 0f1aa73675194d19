"""The session stage: ``session-ended`` -> the session's messages, new ones flagged."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from functools import cache
from typing import Any

import faust

from memstream import metrics, tracing
from memstream.events.deadletter import SourceRecord
from memstream.longterm.history_wait import HistoryOrdering
from memstream.longterm.payloads import Session, dumps, ended_at
from memstream.longterm.stages import collect
from memstream.store.agents import long_term_enabled
from memstream.streams import delivery, services
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_judge, session_ended, summary_check
from memstream.streams.user_queues import (
    announce,
    release_session,
    released_when_dead_lettered,
    session_of_end,
)
from memstream_client.contract.events import SessionEnded, parse_session_end

STAGE = "session"
HISTORY_WAIT_SECONDS = 30.0
"""How long a session end waits for its messages before it is tried again later."""
BURST = 200  # session ends read, waited for and handled together
BURST_SECONDS = 0.5  # how long a burst waits for more session ends
AT_ONCE = 8  # sessions of different conversations handled side by side (within the pool)


@cache
def progress() -> HistoryOrdering:
    return HistoryOrdering(settings)


async def handle(ended: SessionEnded, source: SourceRecord) -> None:
    """Outages of the database or the broker end in a retry of the whole session: every step
    here can be repeated. The session's messages are in the record (``stored``)."""
    current = Session.of(ended, tracing.traceparent(), source.first)
    if await services.forgotten_before(current.tenant_id, current.user_id, current.origin):
        # Said before the user was forgotten: nothing of it is learned (a replay, a retry).
        await release_session(current, "forgotten")
        metrics.EVENTS.labels(STAGE, "dropped_forgotten").inc()
        return
    # No long-term work for an agent that opted out or binds no model, as on the load path.
    config = await services.router().config(current.tenant_id, current.agent_id)
    wanted = long_term_enabled(config)
    messages, marks = services.resources().messages, services.marks()
    collected = None
    if wanted:
        collected = await collect(current, messages, marks, kept_back=await kept_back(current))
    check = dumps(tenant_id=current.tenant_id, conversation_id=current.conversation_id)
    await summary_check.send(
        key=current.conversation_id.encode(), value=check, headers=tracing.headers()
    )
    if collected is None:
        outcome = "nothing_new" if wanted else "long_term_off"
        await release_session(current, outcome)
        metrics.EVENTS.labels(STAGE, outcome).inc()
        return
    # Hand the session on (durably) before recording its marks: a crash in between re-sends
    # it and the later stages are idempotent, while marks first could lose it.
    at = ended_at(ended, source.timestamp)
    record = dumps(session=current, messages=collected.messages, at=at)
    await delivery.send_durably(lt_judge, current.conversation_id.encode(), record)
    await services.marks().record(current.tenant_id, current.conversation_id, collected.new_marks)
    metrics.EVENTS.labels(STAGE, "judged").inc()


async def kept_back(current: Session) -> frozenset[str]:
    """The messages of a forgotten user the record still holds (a forget that kept the
    history) from before the forget: never learned from again."""
    forgotten = services.forgets().of(current.tenant_id, current.user_id)
    if forgotten is None or not forgotten.message_id:
        return frozenset()
    return frozenset(
        await services.resources().messages.written_through(
            current.tenant_id, current.conversation_id, current.user_id, forgotten.message_id
        )
    )


async def stored(events: list[faust.EventT[Any]]) -> None:
    """Wait until the messages of every session ended in ``events`` (published before its
    end) are in the record: once for the latest end, which covers the others."""
    stamps = [e.message.timestamp for e in events]
    latest = max((t for t in stamps if t is not None and t >= 0), default=None)
    if latest is None:
        return
    # Never across a rebalance: the history stage could not move until these events let go.
    await progress().wait(
        int(latest * 1000), within=HISTORY_WAIT_SECONDS, interrupted=lambda: bool(app.rebalancing)
    )


async def handle_burst(settle: Settle, events: list[faust.EventT[Any]]) -> None:
    """The sessions of different conversations side by side (``AT_ONCE`` at most: each waits
    on the database and the broker more than it computes), each conversation's in order.
    Events are keyed by their conversation; unkeyed ones are handled one after another."""
    by_conversation: dict[bytes | None, list[faust.EventT[Any]]] = defaultdict(list)
    for event in events:
        by_conversation[event.message.key].append(event)
    limit = asyncio.Semaphore(AT_ONCE)

    async def in_order(conversation: list[faust.EventT[Any]]) -> None:
        async with limit:
            await settle.one_by_one(conversation, parse_session_end, handle)

    await asyncio.gather(*(in_order(c) for c in by_conversation.values()))


@app.agent(session_ended)
async def session(stream: faust.StreamT[Any]) -> None:
    """Events of one conversation share a partition, so one worker handles a session at a time
    (partition affinity instead of the reference's Redis lock). Session ends come in bursts:
    the history stage commits about once a second, so each burst waits for it once, not each
    session end in turn. Each session end is announced to its user's queue in the conflict
    stage first, so that the user's later sessions wait for it there whatever happens here."""
    settle = Settle(STAGE, stream, dead_lettered=released_when_dead_lettered(session_of_end))
    async for events in settle.bursts(BURST, within=BURST_SECONDS):
        try:
            await announce(events)
            await stored(events)
        except Exception as exc:
            await settle.failed(events, exc)
            continue
        await handle_burst(settle, events)
