"""The conflict stage: each candidate against the live memories of its cube."""

from __future__ import annotations

from functools import cache
from typing import Any

import faust

from memstream import metrics
from memstream.agents.retry import fail
from memstream.longterm.conflict import LLMConflictResolver
from memstream.longterm.payloads import candidates_of, dumps, loads, session_of
from memstream.longterm.stages import plan
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.topics import lt_conflict, lt_persist

STAGE = "conflict"


@cache
def resolver() -> LLMConflictResolver | None:
    client = shared.llm()
    return LLMConflictResolver(client) if client else None


@app.agent(lt_conflict)
async def conflict(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        record = loads(event.message.value)
        attempt = int(record.pop("attempt", 0))
        current = session_of(record)
        try:
            provider = await shared.router().for_agent(current.tenant_id, current.agent_id)
            verdict = await plan(current, candidates_of(record), provider, resolver())
        except Exception as exc:
            await fail(STAGE, event, record, attempt, exc)
            continue
        metrics.MEMORIES.labels("skipped").inc(verdict.skipped)
        if verdict.store or verdict.expire:
            await shared.send_durably(
                lt_persist,
                event.message.key,
                dumps(session=current, store=verdict.store, expire=verdict.expire),
            )
