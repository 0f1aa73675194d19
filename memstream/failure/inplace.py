"""Retrying in place with capped, jittered exponential backoff, for the writes a stage cannot
move past (like the record itself)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memstream import metrics
from memstream.errors import Refused
from memstream.failure.classify import REFUSED, TRANSIENT
from memstream_client.retry import Backoff

log = logging.getLogger(__name__)
T = TypeVar("T")


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
    backoff = Backoff(0.1, max_backoff, spread=(0.5, 1.5))
    retry = 0
    while True:
        try:
            return await call()
        except REFUSED as exc:
            raise Refused() from exc
        except transient as exc:
            metrics.RETRIES.labels(stage, op).inc()
            pause = backoff.pause(retry)
            retry += 1
            log.warning("%s/%s failed (%r); retrying in %.1fs", stage, op, exc, pause)
        await asyncio.sleep(pause)
