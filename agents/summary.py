"""The summary stage: when 20 messages of a conversation are not covered by its summary,
write or merge the summary (LLM when configured, else extractive)."""

from __future__ import annotations

from functools import partial
from typing import Any

import faust

from memstream import metrics
from memstream.longterm.payloads import loads
from memstream.longterm.summary import extractive_summary, llm_summary
from memstream.retry import retry_forever
from memstream.store.summaries import Summary
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.topics import summary_check
from memstream.text.tokens import count_tokens

STAGE = "summary"
TRIGGER = 20  # uncovered messages that call for a new summary (CONTRACT section 5)
BUDGET = 2000  # tokens, about


async def summarise(tenant_id: str, conversation_id: str) -> None:
    store = shared.summaries()
    uncovered = await store.uncovered(tenant_id, conversation_id)
    if len(uncovered.messages) < TRIGGER:
        return
    turns = [(role, content) for _, role, content in uncovered.messages]
    client = shared.llm()
    if client is not None:
        text = await llm_summary(client, uncovered.previous, turns, budget_tokens=BUDGET)
    else:
        text = extractive_summary(uncovered.previous, turns, budget_tokens=BUDGET)
    summary = Summary(text, count_tokens(text))
    await store.save(
        tenant_id,
        conversation_id,
        summary,
        covered=uncovered.covered + len(uncovered.messages),
        last_message_id=uncovered.messages[-1][0],
    )
    cache = shared.resources().cache
    if cache is not None:
        try:
            await cache.cache_summary(
                tenant_id, conversation_id, text, summary.token_count,
                settings.summary_cache_ttl_seconds,
            )  # fmt: skip
        except Exception:
            metrics.CACHE.labels("summary", "error").inc()
    metrics.EVENTS.labels(STAGE, "written").inc()


@app.agent(summary_check)
async def summary(stream: faust.StreamT[Any]) -> None:
    """Checks come in bursts (one per conversation per history batch): one count query each
    burst finds the conversations due, so summaries never run on every message."""
    async for values in stream.take(1000, within=1.0):
        wanted = sorted({(v["tenant_id"], v["conversation_id"]) for v in map(loads, values)})
        query = partial(shared.summaries().uncovered_counts, wanted)
        counts = await retry_forever(
            STAGE, "count", query, max_backoff=settings.db_retry_max_seconds
        )
        for (tenant_id, conversation_id), count in counts.items():
            if count >= TRIGGER:
                write = partial(summarise, tenant_id, conversation_id)
                await retry_forever(
                    STAGE, "write", write, max_backoff=settings.db_retry_max_seconds
                )
