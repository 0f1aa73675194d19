"""The session stage: ``session-ended`` -> the session's messages, new ones flagged."""

from __future__ import annotations

from functools import cache, partial
from typing import Any

import faust

from memstream import metrics
from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.events.parse import parse_session_end
from memstream.kafka import HistoryProgress
from memstream.longterm.payloads import Session, dumps
from memstream.longterm.stages import collect
from memstream.retry import retry_forever
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.topics import lt_judge, session_ended, summary_check

STAGE = "session"


@cache
def progress() -> HistoryProgress:
    return HistoryProgress(settings)


async def handle(source: SourceRecord) -> None:
    try:
        ended = parse_session_end(source.value)
    except InvalidEvent as exc:
        letter = dead_letter(exc.reason, exc.detail, STAGE, source)
        send = partial(shared.publish_dead_letters, [letter])
        await retry_forever(STAGE, "dead_letter", send, transient=(Exception,))
        metrics.DEAD_LETTERS.labels(STAGE, exc.reason).inc()
        return
    current = Session.of(ended)
    if source.timestamp is not None:
        # Wait until the session's messages (published before its end) are in the record.
        await retry_forever(
            STAGE, "history_progress", partial(progress().wait, int(source.timestamp * 1000)),
            transient=(Exception,),
        )  # fmt: skip
    wait = settings.db_retry_max_seconds
    load = partial(collect, current, shared.resources().messages, shared.marks())
    collected = await retry_forever(STAGE, "collect", load, max_backoff=wait)
    check = dumps(tenant_id=current.tenant_id, conversation_id=current.conversation_id)
    await summary_check.send(key=current.conversation_id.encode(), value=check)
    if collected is None:
        metrics.EVENTS.labels(STAGE, "nothing_new").inc()
        return
    # Hand the session on (durably) before recording its marks: a crash in between re-sends
    # it and the later stages are idempotent, while marks first could lose it.
    record = dumps(session=current, messages=collected.messages)
    await shared.send_durably(lt_judge, current.conversation_id.encode(), record)
    mark = partial(
        shared.marks().record, current.tenant_id, current.conversation_id, collected.new_marks
    )
    await retry_forever(STAGE, "marks", mark, max_backoff=wait)
    metrics.EVENTS.labels(STAGE, "judged").inc()


@app.agent(session_ended)
async def session(stream: faust.StreamT[Any]) -> None:
    """Events of one conversation share a partition, so one worker handles a session at a time
    (partition affinity instead of the reference's Redis lock)."""
    async for event in stream.events():
        await handle(shared.source_of(event))
