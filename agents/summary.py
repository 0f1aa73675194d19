"""The summary stage: when 20 messages of a conversation are not covered by its summary,
fold them into it (the LLM when configured, else extractively, in a process of its own)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import cache
from typing import Any

import faust

from memstream import metrics, tracing
from memstream.cpu import CpuPool
from memstream.errors import InvalidEvent
from memstream.events.checks import Conversation, read_summary_check
from memstream.settings import SUMMARY_BUDGET_TOKENS
from memstream.shortterm.fold import fold_many
from memstream.shortterm.llm_summary import model_summary
from memstream.store.summaries import Covering, Summary, Uncovered
from memstream.streams import delivery, services
from memstream.streams.app import app, settings
from memstream.streams.stage import Event, Settle, decoded
from memstream.streams.topics import summary_check
from memstream.text.tokens import count_tokens

log = logging.getLogger(__name__)

STAGE = "summary"
TRIGGER = 20  # uncovered messages that call for a new summary (the reference design's number)
FOLD_MESSAGES = 200  # new messages one fold reads at most; the rest go into the next one
CHUNK = 100  # conversations read, folded and written together
CALL_CHARS = 2_000_000  # message text sent to the CPU process in one call, about
LLM_AT_ONCE = 4  # model summaries in flight at once


@cache
def pool() -> CpuPool:
    return CpuPool(STAGE)


async def summarise(conversations: Sequence[Conversation]) -> dict[Conversation, Exception]:
    """Fold the due conversations' new messages into their summaries and store them; answers
    the conversations that failed on their own (the others are stored). Database errors raise:
    they concern every conversation of the call."""
    store = services.summaries()
    mark = await services.forgets().refresh(fresh=True)
    uncovered = await store.uncovered_many(conversations, FOLD_MESSAGES)
    due = {c: u for c, u in uncovered.items() if len(u.messages) >= TRIGGER}
    written: dict[Conversation, Summary] = {}
    client = services.llm()
    if client is not None:
        limit = asyncio.Semaphore(LLM_AT_ONCE)

        async def by_model(conversation: Conversation, work: Uncovered) -> None:
            previous = work.previous.text if work.previous else None
            async with limit:
                text = await model_summary(client, previous, _turns(work))
            if text is not None:
                written[conversation] = Summary(text, count_tokens(text))

        await asyncio.gather(*(by_model(c, u) for c, u in due.items()))
    failed = await _fold([(c, u) for c, u in due.items() if c not in written], written)
    coverings = []
    for conversation, summary in written.items():
        work = due[conversation]
        covered = work.covered + len(work.messages)
        coverings.append(Covering(*conversation, summary, covered, work.messages[-1][0]))
    await store.save_many(coverings)
    await _cache(written)
    await _take_back(mark, list(written))
    metrics.EVENTS.labels(STAGE, "written").inc(len(written))
    return failed


async def _take_back(mark: int, written: list[Conversation]) -> None:
    """A forget that purged a user's history while these were folded may have gone before
    they were written, and they may hold the user's words: they go, folded anew later."""
    await services.forgets().refresh(fresh=True)
    tenants = {tenant for tenant, _ in services.forgets().since(mark, history=True)}
    undo = [c for c in written if c[0] in tenants]
    if not undo:
        return
    await services.summaries().drop(undo)
    cache_ = services.resources().cache
    if cache_ is not None:
        await cache_.forget(undo)
    metrics.EVENTS.labels(STAGE, "taken_back_forgotten").inc(len(undo))


def _turns(work: Uncovered) -> list[tuple[str, str]]:
    return [(role, content) for _, role, content in work.messages]


async def _fold(
    work: list[tuple[Conversation, Uncovered]], into: dict[Conversation, Summary]
) -> dict[Conversation, Exception]:
    """Extractive folds in the CPU process, a few calls of bounded size; a call that fails is
    tried again one conversation at a time, so that one bad conversation fails alone."""
    failed: dict[Conversation, Exception] = {}
    calls: list[list[tuple[Conversation, Uncovered]]] = [[]]
    size = 0
    for item in work:
        chars = sum(len(content) for _, _, content in item[1].messages)
        if calls[-1] and size + chars > CALL_CHARS:
            calls.append([])
            size = 0
        calls[-1].append(item)
        size += chars
    for call in filter(None, calls):
        try:
            folds = [(u.previous, _turns(u)) for _, u in call]
            folded = await pool().run(fold_many, folds, SUMMARY_BUDGET_TOKENS)
        except Exception as exc:
            if len(call) == 1:
                log.error("summary of %s failed", call[0][0], exc_info=exc)
                failed[call[0][0]] = exc
                continue
            log.warning("a fold of %d conversations failed (%r); one at a time", len(call), exc)
            failed.update(await _fold_each(call, into))
            continue
        for (conversation, _), summary in zip(call, folded, strict=True):
            into[conversation] = summary
    return failed


async def _fold_each(
    call: list[tuple[Conversation, Uncovered]], into: dict[Conversation, Summary]
) -> dict[Conversation, Exception]:
    failed: dict[Conversation, Exception] = {}
    for item in call:
        failed.update(await _fold([item], into))
    return failed


async def _cache(written: dict[Conversation, Summary]) -> None:
    cache_ = services.resources().cache
    if cache_ is None or not written:
        return
    results = await asyncio.gather(
        *(
            cache_.cache_summary(
                tenant_id, conversation_id, summary.text, summary.token_count,
                settings.summary_cache_ttl_seconds,
            )
            for (tenant_id, conversation_id), summary in written.items()
        ),
        return_exceptions=True,
    )  # fmt: skip
    errors = sum(isinstance(r, BaseException) for r in results)
    if errors:
        metrics.CACHE.labels("summary", "error").inc(errors)


async def settle_burst(settle: Settle, events: list[Event]) -> None:
    """Checks come in bursts (a few per history batch): one count query per burst finds the
    conversations due, so summaries never run on every message. Each check is acknowledged
    with the outcome of its conversations: finished, or failed as the first failure says."""
    asked: list[tuple[Event, list[Conversation]]] = []
    for event in events:
        try:
            asked.append((event, decoded(read_summary_check, delivery.source_of(event))))
        except InvalidEvent as exc:
            await settle.failed([event], exc)
    conversations = sorted({c for _, listed in asked for c in listed})
    outcome: dict[Conversation, Exception] = {}
    try:
        counts = await services.summaries().uncovered_counts(conversations)
    except Exception as exc:
        outcome = dict.fromkeys(conversations, exc)  # nothing is known about any of them
    else:
        due = [c for c in conversations if counts.get(c, 0) >= TRIGGER]
        for start in range(0, len(due), CHUNK):
            chunk = due[start : start + CHUNK]
            try:
                outcome.update(await summarise(chunk))
            except Exception as exc:
                outcome.update(dict.fromkeys(chunk, exc))
    for event, listed in asked:
        failure = next((outcome[c] for c in listed if c in outcome), None)
        if failure is None:
            await settle.finished([event])
        else:
            await settle.failed([event], failure)


@app.agent(summary_check)
async def summary(stream: faust.StreamT[Any]) -> None:
    settle = Settle(STAGE, stream)
    # noack_take: each check is acknowledged by hand once settled, never for the whole burst.
    async for events in settle.stream.noack_take(1000, within=1.0):
        with tracing.batch(STAGE, [e.message.headers for e in events]):
            await settle_burst(settle, list(events))
