"""The judge stage: the LLM (or the rule-based judge) proposes candidate memories."""

from __future__ import annotations

from functools import cache
from typing import Any

import faust

from memstream import metrics
from memstream.cpu import CpuPool
from memstream.events.deadletter import SourceRecord
from memstream.longterm.judge import Judge
from memstream.longterm.models import SessionMessage
from memstream.longterm.payloads import Session, at_of, dumps, loads, messages_of, session_of
from memstream.store.agents import bound_model
from memstream.streams import delivery, services
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_dedupe, lt_judge
from memstream.streams.user_queues import (
    release_session,
    released_when_dead_lettered,
    session_of_record,
)

STAGE = "judge"


@cache
def judge_of_worker() -> Judge:
    # The rules and episodes are regexes over user text: they run in a process of their own.
    return Judge(services.llm(), CpuPool(STAGE))


Judged = tuple[Session, list[SessionMessage], float | None]


def read(raw: bytes | None) -> Judged:
    """A session, its messages and when it ended."""
    record = loads(raw or b"")
    return session_of(record), messages_of(record), at_of(record)


async def handle(session: Judged, source: SourceRecord) -> None:
    current, messages, at = session
    if await services.forgotten_before(current.tenant_id, current.user_id, current.origin):
        await release_session(current, "forgotten")
        metrics.EVENTS.labels(STAGE, "dropped_forgotten").inc()
        return
    config = await services.router().config(current.tenant_id, current.agent_id)
    model = bound_model(config, settings.model_of_target)
    # LLM errors, timeouts and bad output fall back to the rules inside the judge.
    result = await judge_of_worker().judge(messages, agent_id=current.agent_id, model=model)
    metrics.EVENTS.labels(STAGE, result.method).inc()
    await delivery.send_durably(
        lt_dedupe,
        source.key,
        dumps(session=current, candidates=list(result.memories), method=result.method, at=at),
    )


@app.agent(lt_judge)
async def judge(stream: faust.StreamT[Any]) -> None:
    released = released_when_dead_lettered(session_of_record)
    await Settle(STAGE, stream, dead_lettered=released).every_record(read, handle)
