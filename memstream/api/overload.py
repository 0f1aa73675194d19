"""Admission control: when the process cannot keep up, answer degraded or refuse at once.

A process that takes every request it is sent serves them ever later once it is saturated:
the requests pile up on the event loop and wait there (minutes, under a cold-user burst)
before any time limit of theirs starts. Here each ``/v1`` request first takes one of
``MEMSTREAM_API_MAX_IN_FLIGHT`` slots, waiting at most ``MEMSTREAM_API_QUEUE_SECONDS`` for one,
else it is refused with 503 and ``Retry-After``. A watch on the event loop measures how late it
wakes up; while it has lagged by more than ``MEMSTREAM_API_LAG_SECONDS`` within the last
second, ``/v1/context`` answers from the short-term window only (``degraded`` names
``long_term``), which sheds the CPU that long-term search costs until the loop catches up.
The time a request is first seen here is its arrival: the load path's limits count from it,
so waiting for a slot counts against them. Health, readiness, metrics and the dashboard are
never shed: an operator must see an overloaded process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream import metrics
from memstream.api.errors import error_body

_ADMITTED = "/v1/"
# Scope keys the load path's route reads: when the request arrived (loop time) and whether
# the loop was lagging then.
ARRIVED = "memstream.arrived"
LAGGING = "memstream.lagging"
TICK_SECONDS = 0.05  # how often the watch wakes up: lag shorter than this goes unseen
WINDOW_SECONDS = 1.0  # lag is remembered for one to two windows, so the answer does not flap
RETRY_AFTER_SECONDS = 1


class LagMeter:
    """How late the loop has woken up lately, from the times a watch expected and got.

    The worst lateness of the current window and of the one before it, or the lateness of a
    wake-up that is overdue right now (a loop busy with one long callback never gets to say).
    """

    __slots__ = ("_due", "_previous", "_window", "_worst", "window")

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self._due: float | None = None
        self._window: int | None = None
        self._worst = 0.0
        self._previous = 0.0

    def expect(self, due: float) -> None:
        """The watch will wake up at ``due``."""
        self._due = due

    def woke(self, now: float) -> None:
        """The watch woke up at ``now``."""
        if self._due is None:
            return
        self._roll(now)
        self._worst = max(self._worst, now - self._due)
        self._due = None

    def lag(self, now: float) -> float:
        """Seconds the loop has been late by, lately; 0 on time."""
        self._roll(now)
        overdue = now - self._due if self._due is not None else 0.0
        return max(0.0, overdue, self._worst, self._previous)

    def _roll(self, now: float) -> None:
        window = math.floor(now / self.window)
        if self._window is None:
            self._window = window
        if window <= self._window:
            return
        self._previous = self._worst if window == self._window + 1 else 0.0
        self._worst = 0.0
        self._window = window


class Slots:
    """At most ``limit`` requests in flight; a request waits ``wait`` seconds for a slot at most."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0
        self._free = asyncio.Semaphore(limit)

    async def take(self, wait: float) -> bool:
        """True with a slot taken (give it back with ``release``), False when none came."""
        if not self._free.locked():
            await self._free.acquire()  # a free slot, no waiter before it: taken at once
        elif wait <= 0:
            return False
        else:
            try:
                async with asyncio.timeout(wait):
                    await self._free.acquire()
            except TimeoutError:
                return False
        self.busy += 1
        return True

    def release(self) -> None:
        self.busy -= 1
        self._free.release()


class Admission:
    """Pure ASGI middleware: slots for ``/v1`` requests, the loop's watch over the lifespan."""

    def __init__(
        self, app: ASGIApp, *, max_in_flight: int, queue_seconds: float, lag_seconds: float
    ) -> None:
        self.app = app
        self.slots = Slots(max_in_flight)
        self.queue_seconds = queue_seconds
        self.lag_seconds = lag_seconds
        self.meter = LagMeter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http" or not scope["path"].startswith(_ADMITTED):
            await self.app(scope, receive, send)
            return
        now = asyncio.get_running_loop().time()
        scope[ARRIVED] = now
        scope[LAGGING] = self.meter.lag(now) > self.lag_seconds
        if not await self.slots.take(self.queue_seconds):
            metrics.OVERLOAD.labels("refused", "in_flight").inc()
            await _refuse(send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.release()

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app's lifespan with the loop's watch running beside it once the app is ready.

        Startup holds the loop on purpose (connections, the one-time work done before the first
        request, a full collection): watched, it would pass for lag and degrade the first
        second or two of answers of every process that just started, on a quiet machine too.
        """
        watch: asyncio.Task[None] | None = None

        async def started(message: Message) -> None:
            nonlocal watch
            if message["type"] == "lifespan.startup.complete" and watch is None:
                watch = asyncio.create_task(self._watch())
            await send(message)

        try:
            await self.app(scope, receive, started)
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.meter.expect(loop.time() + TICK_SECONDS)
            await asyncio.sleep(TICK_SECONDS)
            now = loop.time()
            self.meter.woke(now)
            metrics.LOOP_LAG.set(self.meter.lag(now))


async def _refuse(send: Send) -> None:
    body = orjson.dumps(
        error_body(
            "overloaded",
            f"the server is over capacity; retry after {RETRY_AFTER_SECONDS} s",
        )
    )
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
