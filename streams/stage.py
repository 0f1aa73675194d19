"""How every stream stage settles each record it reads: finished, tried again later, or
dead-lettered with its stage and reason, and acknowledged only then, never before.

What a failure means is decided in one place (``memstream.failure.classify``). An outage
(database, provider, broker, network) sends the record to the retry tier of its attempt
(``memstream.failure.tiers``), from where ``agents/retry.py`` sends it back to its topic when
due, until it has been failing for ``MEMSTREAM_RETRY_HORIZON_SECONDS``: then it is dead-lettered
as ``retries_exhausted``. Anything else is dead-lettered at once: ``invalid_payload`` (a record
the stage cannot read), the public event's own reason, ``rejected_by_database`` or
``stage_error``. ``memstream redrive`` sends dead letters back once their cause is fixed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar, cast

import faust

from memstream import metrics, tracing
from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.failure.classify import failure_reason
from memstream.failure.inplace import retry_forever
from memstream.failure.tiers import Failing, next_try
from memstream.streams import delivery
from memstream.streams.topics import retry_policy, retry_tiers

log = logging.getLogger(__name__)
T = TypeVar("T")
Event = faust.EventT[Any]


def decoded(decode: Callable[[bytes | None], T], source: SourceRecord) -> T:
    """``decode`` the record's value; whatever it raises but ``InvalidEvent`` is
    ``invalid_payload``."""
    try:
        return decode(source.value)
    except InvalidEvent:
        raise
    except Exception as exc:
        detail = f"The record cannot be read: {exc!r}."[:500]
        raise InvalidEvent("invalid_payload", detail) from None


def failing_of(event: Event) -> Failing | None:
    """The retry state a redelivered record carries in its headers (None on a first try)."""
    headers = event.message.headers or ()
    return Failing.from_headers(headers.items() if isinstance(headers, Mapping) else headers)


async def publish_dead_letter(stage: str, source: SourceRecord, reason: str, detail: str) -> None:
    """Send the record to dead-letter and wait for the broker to have it."""
    letter = dead_letter(reason, detail, stage, source)
    # The record is acknowledged after this returns, so a broker outage is waited out here.
    send = partial(delivery.publish_dead_letters, [letter])
    await retry_forever(stage, "dead_letter", send, transient=(Exception,))
    metrics.DEAD_LETTERS.labels(stage, reason).inc()


async def retry_later(
    stage: str, source: SourceRecord, failing: Failing | None, exc: Exception
) -> bool:
    """Put the record on the tier of its attempt; False once its retry horizon is spent."""
    retry = next_try(
        stage, source.topic, source.key, source.value, failing, repr(exc), retry_policy,
        now=time.time(), timestamp=source.timestamp, origin=source.first,
    )  # fmt: skip
    if retry is None:
        return False
    tier = retry_policy.tier_of(retry.failing.attempts)
    traced = list(tracing.continuing(source.headers))  # the record's trace, whoever is current
    send = partial(delivery.send_durably, retry_tiers[tier], source.key, retry.encode(), traced)
    await retry_forever(stage, "retry", send, transient=(Exception,))
    metrics.RETRIES.labels(stage, "record").inc()
    log.warning(
        "%s: %s[%d]@%d failed (attempt %d, %r); retried in %.0fs",
        stage, source.topic, source.partition, source.offset, retry.failing.attempts, exc,
        retry_policy.delay(tier),
    )  # fmt: skip
    return True


class Settle:
    """Settles the records of one agent's stream; see the module docstring."""

    def __init__(
        self,
        stage: str,
        stream: faust.StreamT[Any],
        *,
        dead_lettered: Callable[[SourceRecord], Awaitable[None]] | None = None,
    ) -> None:
        """``dead_lettered`` is awaited after each record's dead letter, before its ack."""
        assert isinstance(stream, faust.Stream)  # what agents are given; the type says less
        self.stage = stage
        self.stream: faust.Stream[Any] = stream
        self.dead_lettered = dead_lettered

    async def every_record(
        self,
        decode: Callable[[bytes | None], T],
        handle: Callable[[T, SourceRecord], Awaitable[object]],
    ) -> None:
        """Read the stream one record at a time: decode it, handle it, settle it."""
        self.stream = cast("faust.Stream[Any]", self.stream.noack())  # acked here once settled
        async for event in self.stream.events():
            await self.one_by_one([event], decode, handle)

    async def bursts(self, size: int, within: float) -> AsyncIterator[list[Event]]:
        """The stream's records as they come, up to ``size`` at once (waiting at most
        ``within`` seconds for more); the caller settles each."""
        async for events in self.stream.noack_take(size, within=within):
            yield list(events)

    async def one_by_one(
        self,
        events: Sequence[Event],
        decode: Callable[[bytes | None], T],
        handle: Callable[[T, SourceRecord], Awaitable[object]],
    ) -> None:
        """Decode, handle and settle each of ``events`` in turn."""
        for event in events:
            source = delivery.source_of(event)
            await self.run([event], partial(_decode_and_handle, decode, handle, source))

    async def run(self, events: Sequence[Event], work: Callable[[], Awaitable[object]]) -> bool:
        """Run ``work`` for ``events`` and settle them by how it ended; True when finished.
        It runs in their trace (``memstream.tracing``): what it sends carries it on."""
        with tracing.batch(self.stage, [e.message.headers for e in events]):
            try:
                await work()
            except Exception as exc:
                tracing.failure(exc)
                await self.failed(events, exc)
                return False
            await self.finished(events)
        return True

    async def finished(self, events: Sequence[Event]) -> None:
        for event in events:
            await self.stream.ack(event)
        metrics.RECORDS.labels(self.stage, "finished").inc(len(events))

    async def failed(self, events: Sequence[Event], exc: Exception) -> None:
        """Retry each of ``events`` later or dead-letter it, as ``exc`` calls for; then ack."""
        reason = failure_reason(exc)
        if reason == "stage_error":
            log.error("%s failed on %d record(s)", self.stage, len(events), exc_info=exc)
        for event in events:
            source = delivery.source_of(event)
            outcome = "dead_lettered"
            if reason is not None:
                await publish_dead_letter(self.stage, source, reason, self._detail(reason, exc))
            elif await retry_later(self.stage, source, failing := failing_of(event), exc):
                outcome = "retried"
            else:
                detail = self._exhausted(failing, exc)
                await publish_dead_letter(self.stage, source, "retries_exhausted", detail)
            if outcome == "dead_lettered" and self.dead_lettered is not None:
                # Like the dead letter itself, waited out through a broker outage.
                done = partial(self.dead_lettered, source)
                await retry_forever(self.stage, "dead_lettered", done, transient=(Exception,))
            await self.stream.ack(event)
            metrics.RECORDS.labels(self.stage, outcome).inc()

    def _detail(self, reason: str, exc: Exception) -> str:
        if isinstance(exc, InvalidEvent):
            return exc.detail
        if reason == "rejected_by_database":
            return f"The database refused the record: {exc.__cause__ or exc!r}."[:500]
        return f"The {self.stage} stage failed: {exc!r}."[:500]

    def _exhausted(self, failing: Failing | None, exc: Exception) -> str:
        tries = (failing.attempts if failing else 0) + 1
        elapsed = time.time() - failing.since if failing else 0.0
        detail = f"The {self.stage} stage failed {tries} times over {elapsed:.0f} s; last: {exc!r}."
        return detail[:500]


async def _decode_and_handle(
    decode: Callable[[bytes | None], T],
    handle: Callable[[T, SourceRecord], Awaitable[object]],
    source: SourceRecord,
) -> None:
    await handle(decoded(decode, source), source)
