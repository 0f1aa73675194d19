"""The summary stage: when 20 messages of a conversation are not covered by its summary,
write or merge the summary (LLM when configured, else extractive)."""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any

import faust

from memstream import metrics
from memstream.errors import InvalidEvent
from memstream.longterm.payloads import loads
from memstream.longterm.summary import extractive_summary, llm_summary
from memstream.store.summaries import Summary
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.stage import Event, Settle, decoded
from memstream.streams.topics import summary_check
from memstream.text.tokens import count_tokens

STAGE = "summary"
TRIGGER = 20  # uncovered messages that call for a new summary (CONTRACT section 5)
BUDGET = 2000  # tokens, about
Conversation = tuple[str, str]  # (tenant_id, conversation_id)


def read(raw: bytes | None) -> Conversation:
    check = loads(raw or b"")
    tenant_id, conversation_id = check["tenant_id"], check["conversation_id"]
    if not isinstance(tenant_id, str) or not isinstance(conversation_id, str):
        raise TypeError("tenant_id and conversation_id must be strings")
    return tenant_id, conversation_id


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


async def settle_burst(settle: Settle, events: list[Event]) -> None:
    """Checks come in bursts (one per conversation per history batch): one count query each
    burst finds the conversations due, so summaries never run on every message. Each check is
    acknowledged with its conversation's outcome."""
    checks: dict[Conversation, list[Event]] = defaultdict(list)
    for event in events:
        try:
            checks[decoded(read, shared.source_of(event))].append(event)
        except InvalidEvent as exc:
            await settle.failed([event], exc)
    try:
        counts = await shared.summaries().uncovered_counts(sorted(checks)) if checks else {}
    except Exception as exc:
        # Nothing is known about any of them: they share the failure's outcome.
        await settle.failed([e for group in checks.values() for e in group], exc)
        return
    for conversation, group in checks.items():
        if counts.get(conversation, 0) < TRIGGER:
            await settle.finished(group)
        else:
            await settle.run(group, partial(summarise, *conversation))


@app.agent(summary_check)
async def summary(stream: faust.StreamT[Any]) -> None:
    settle = Settle(STAGE, stream)
    # noack_take: each check is acknowledged by hand once settled, never for the whole burst.
    async for events in settle.stream.noack_take(1000, within=1.0):
        await settle_burst(settle, list(events))
