"""The conflict stage: each candidate against the live memories of its cube."""

from __future__ import annotations

from functools import cache
from typing import Any

import faust

from memstream import metrics
from memstream.agents.dedupe import Candidates, read
from memstream.events.deadletter import SourceRecord
from memstream.longterm.conflict import LLMConflictResolver
from memstream.longterm.payloads import dumps
from memstream.longterm.stages import plan
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_conflict, lt_persist

STAGE = "conflict"


@cache
def resolver() -> LLMConflictResolver | None:
    client = shared.llm()
    return LLMConflictResolver(client) if client else None


async def handle(proposed: Candidates, source: SourceRecord) -> None:
    current, candidates = proposed
    provider = await shared.router().for_agent(current.tenant_id, current.agent_id)
    verdict = await plan(current, candidates, provider, resolver())
    metrics.MEMORIES.labels("skipped").inc(verdict.skipped)
    if verdict.store or verdict.expire:
        await shared.send_durably(
            lt_persist,
            source.key,
            dumps(session=current, store=verdict.store, expire=verdict.expire),
        )


@app.agent(lt_conflict)
async def conflict(stream: faust.StreamT[Any]) -> None:
    await Settle(STAGE, stream).each(read, handle)
