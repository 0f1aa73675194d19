"""Waiting out outages: which failures are outages, and retry in place with capped, jittered
exponential backoff (for the writes a stage cannot move past, like the record itself)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import KafkaError, KafkaTimeoutError
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from memstream import metrics
from memstream.errors import (
    HistoryBehind,
    InvalidEvent,
    ProviderUnavailable,
    Refused,
    ServiceUnavailable,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Outages worth waiting for: the database, the network, timeouts.
TRANSIENT: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    OSError,
    ConnectionError,
    TimeoutError,
)
# Data the database itself refuses: retrying cannot help.
REFUSED: tuple[type[BaseException], ...] = (IntegrityError, DataError)
# What a stream stage waits out by trying a record again later.
OUTAGES: tuple[type[BaseException], ...] = (
    *TRANSIENT,
    HistoryBehind,
    ProviderUnavailable,
    ServiceUnavailable,
    KafkaTimeoutError,
)


def failure_reason(exc: BaseException) -> str | None:
    """What becomes of a record whose handling raised ``exc``: None to try it again later (an
    outage of the database, a provider, the broker or the network), else the dead-letter reason
    (the event's own, ``rejected_by_database``, or ``stage_error`` for anything unforeseen)."""
    if isinstance(exc, InvalidEvent):
        return exc.reason
    if isinstance(exc, (Refused, *REFUSED)):
        return "rejected_by_database"
    if isinstance(exc, OUTAGES) or (isinstance(exc, KafkaError) and exc.retriable):
        return None
    return "stage_error"


async def retry_forever(
    stage: str,
    op: str,
    call: Callable[[], Awaitable[T]],
    *,
    max_backoff: float = 30.0,
    transient: tuple[type[BaseException], ...] = TRANSIENT,
) -> T:
    """Run ``call`` until it succeeds; refused data raises ``Refused``, other errors raise.

    The caller has not acknowledged its input meanwhile, so a crash while waiting loses
    nothing: the input is redelivered.
    """
    delay = 0.1
    while True:
        try:
            return await call()
        except REFUSED as exc:
            raise Refused() from exc
        except transient as exc:
            metrics.RETRIES.labels(stage, op).inc()
            log.warning("%s/%s failed (%r); retrying in %.1fs", stage, op, exc, delay)
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, max_backoff)
