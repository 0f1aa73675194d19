"""Retrying an HTTP call: which answers are worth another try, and the pauses between tries.

Each caller says which of its failures are worth another try (by raising :class:`RetryLater`
from an attempt, or with a predicate of its own); :class:`HttpRetry` pauses between attempts as
:class:`Backoff` says: doubling, capped, spread at random and never shorter than the server's
``Retry-After``. The API client retries with it, and so does every HTTP client of the memstream
server (``memstream.failure.http``); the server's retries in place pause by the same backoff.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

# Answers that another try may get right: too many requests, and the server's transient errors.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class RetryLater(Exception):
    """One attempt failed in a way a later one may not; ``after`` is the server's Retry-After
    and ``response`` the answer, when there was one."""

    def __init__(
        self, detail: str, *, after: float | None = None, response: httpx.Response | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.after = after
        self.response = response


@dataclass(frozen=True, slots=True)
class Backoff:
    """Pauses that double from ``first`` up to ``cap``, each multiplied by a random factor in
    ``spread`` (so concurrent callers do not retry in step), and never shorter than what the
    other side asked for (up to the cap). Every retry of memstream's that pauses uses it."""

    first: float
    cap: float = math.inf
    spread: tuple[float, float] = (1.0, 1.0)

    def pause(self, retry: int, asked: float | None = None) -> float:
        """Seconds before retry ``retry`` (0 for the first), ``asked`` by the server or not."""
        delay = min(self.cap, self.first * 2.0**retry)
        low, high = self.spread
        delay *= low + (high - low) * random.random()
        if asked is not None:
            delay = max(delay, min(asked, self.cap))
        return delay


@dataclass(frozen=True, slots=True)
class HttpRetry:
    """At most ``attempts`` tries in all, paused by the :class:`Backoff` of ``first``, ``cap``
    and ``spread``."""

    attempts: int
    first: float
    cap: float = math.inf
    spread: tuple[float, float] = (1.0, 1.0)

    def pause(self, retry: int, asked: float | None = None) -> float:
        """Seconds before retry ``retry`` (0 for the first), ``asked`` by the server or not."""
        return Backoff(self.first, self.cap, self.spread).pause(retry, asked)

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        retried: Callable[[int, Exception, float], None] | None = None,
        *,
        worth: Callable[[Exception], bool] = lambda exc: isinstance(exc, RetryLater),
    ) -> T:
        """``attempt()`` until it returns, raises what is not ``worth`` another try, or has
        used every try (its last failure then raises); ``retried(tries, failure, pause)``
        hears of each retry before its pause."""
        import asyncio  # here, not with the module: a client without an event loop never needs it

        tried = 0
        while True:
            try:
                return await attempt()
            except Exception as failure:
                tried += 1
                if tried >= self.attempts or not worth(failure):
                    raise
                pause = self.pause(tried - 1, getattr(failure, "after", None))
                if retried is not None:
                    retried(tried, failure, pause)
            await asyncio.sleep(pause)

    def run_sync(
        self,
        attempt: Callable[[], T],
        *,
        worth: Callable[[Exception], bool] = lambda exc: isinstance(exc, RetryLater),
    ) -> T:
        """:meth:`run` for code without an event loop."""
        tried = 0
        while True:
            try:
                return attempt()
            except Exception as failure:
                tried += 1
                if tried >= self.attempts or not worth(failure):
                    raise
                pause = self.pause(tried - 1, getattr(failure, "after", None))
            time.sleep(pause)


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (None when absent or not seconds)."""
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
