"""The judge stage: the LLM (or the rule-based judge) proposes candidate memories."""

from __future__ import annotations

from functools import cache
from typing import Any

import faust

from memstream import metrics
from memstream.longterm.judge import Judge
from memstream.longterm.payloads import dumps, loads, messages_of, session_of
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.topics import lt_dedupe, lt_judge

STAGE = "judge"


@cache
def judge_of_worker() -> Judge:
    return Judge(shared.llm())


@app.agent(lt_judge)
async def judge(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        record = loads(event.message.value)
        current = session_of(record)
        # The judge never fails: LLM errors, timeouts and bad output fall back to the rules.
        result = await judge_of_worker().judge(messages_of(record), agent_id=current.agent_id)
        metrics.EVENTS.labels(STAGE, result.method).inc()
        await shared.send_durably(
            lt_dedupe,
            event.message.key,
            dumps(session=current, candidates=list(result.candidates), method=result.method),
        )
