"""The session stage: ``session-ended`` -> the session's messages, new ones flagged."""

from __future__ import annotations

from functools import cache
from typing import Any

import faust

from memstream import metrics
from memstream.events.deadletter import SourceRecord
from memstream.events.parse import SessionEnded, parse_session_end
from memstream.longterm.ordering import HistoryOrdering
from memstream.longterm.payloads import Session, dumps
from memstream.longterm.stages import collect
from memstream.store.agents import long_term_enabled
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_judge, session_ended, summary_check

STAGE = "session"
HISTORY_WAIT_SECONDS = 30.0
"""How long a session end waits for its messages before it is tried again later."""


@cache
def progress() -> HistoryOrdering:
    return HistoryOrdering(settings)


async def handle(ended: SessionEnded, source: SourceRecord) -> None:
    """Outages of the database or the broker end in a retry of the whole session: every step
    here can be repeated."""
    current = Session.of(ended)
    if source.timestamp is not None and source.timestamp >= 0:
        # Wait until the session's messages (published before its end) are in the record.
        # Never across a rebalance: the history stage could not move until this event let go.
        await progress().wait(
            int(source.timestamp * 1000),
            within=HISTORY_WAIT_SECONDS,
            interrupted=lambda: bool(app.rebalancing),
        )
    # No long-term work for an agent that opted out or binds no model, as on the load path.
    config = await shared.router().config(current.tenant_id, current.agent_id)
    wanted = long_term_enabled(config)
    messages, marks = shared.resources().messages, shared.marks()
    collected = await collect(current, messages, marks) if wanted else None
    check = dumps(tenant_id=current.tenant_id, conversation_id=current.conversation_id)
    await summary_check.send(key=current.conversation_id.encode(), value=check)
    if collected is None:
        metrics.EVENTS.labels(STAGE, "nothing_new" if wanted else "long_term_off").inc()
        return
    # Hand the session on (durably) before recording its marks: a crash in between re-sends
    # it and the later stages are idempotent, while marks first could lose it.
    record = dumps(session=current, messages=collected.messages)
    await shared.send_durably(lt_judge, current.conversation_id.encode(), record)
    await shared.marks().record(current.tenant_id, current.conversation_id, collected.new_marks)
    metrics.EVENTS.labels(STAGE, "judged").inc()


@app.agent(session_ended)
async def session(stream: faust.StreamT[Any]) -> None:
    """Events of one conversation share a partition, so one worker handles a session at a time
    (partition affinity instead of the reference's Redis lock)."""
    await Settle(STAGE, stream).each(parse_session_end, handle)
