"""Failed conflict/persist records: to the retry topic with backoff, then to dead-letter."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import faust
import orjson

from memstream import metrics
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.longterm.backoff import RetryRecord, next_try
from memstream.retry import retry_forever
from memstream.streams import shared
from memstream.streams.app import app, settings
from memstream.streams.topics import lt_conflict, lt_persist, lt_retry

log = logging.getLogger(__name__)
TARGETS = {"conflict": lt_conflict, "persist": lt_persist}


async def fail(
    stage: str, event: faust.EventT[Any], record: dict[str, Any], attempt: int, exc: Exception
) -> None:
    """Schedule another try of ``record``, or dead-letter it when its tries are spent."""
    metrics.RETRIES.labels(stage, "provider").inc()
    log.warning("%s failed (attempt %d): %r", stage, attempt + 1, exc)
    retry = next_try(
        stage,
        record,
        attempt,
        repr(exc),
        max_attempts=settings.retry_max_attempts,
        base=settings.retry_base_seconds,
    )
    if retry is not None:
        await shared.send_durably(lt_retry, event.message.key, retry.encode())
        return
    source = shared.source_of(event)
    payload = SourceRecord(
        source.topic, source.partition, source.offset, source.timestamp, source.key,
        orjson.dumps(record),
    )  # fmt: skip
    detail = f"{stage} failed {attempt + 1} times; last error: {exc!r}"[:500]
    letter = dead_letter("retries_exhausted", detail, stage, payload)
    await retry_forever(
        stage, "dead_letter", lambda: shared.publish_dead_letters([letter]), transient=(Exception,)
    )
    metrics.DEAD_LETTERS.labels(stage, "retries_exhausted").inc()


@app.agent(lt_retry)
async def retry(stream: faust.StreamT[Any]) -> None:
    """Hold each record until its time, then hand it back to its stage."""
    async for event in stream.events():
        pending = RetryRecord.decode(event.message.value)
        wait = pending.not_before - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        value = orjson.dumps({**pending.record, "attempt": pending.attempt})
        await shared.send_durably(TARGETS[pending.stage], event.message.key, value)
