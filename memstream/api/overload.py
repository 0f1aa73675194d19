"""Admission control: each tenant its share of the process, and past capacity an answer at
once (short-term only, 429 or 503 with ``Retry-After``) instead of a queue; a body is read
before anything is taken for it. Why: docs/design/admission.md."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream import metrics
from memstream.api.auth import TENANT
from memstream.api.errors import error_body
from memstream.api.fairness import OPEN, Policy, Refusal, Tenants
from memstream.api.server import RECEIVED

_ADMITTED = "/v1/"
# Scope keys the load path's route reads: when the request arrived (loop time) and whether
# the loop was lagging then.
ARRIVED = "memstream.arrived"
LAGGING = "memstream.lagging"
# Set by a route whose answer is a long stream (an export): the process slot is given back
# once its answer starts, while the tenant's in-flight share still counts it until it ends.
STREAMING = "memstream.streaming"
TICK_SECONDS = 0.05  # how often the watch wakes up: lag shorter than this goes unseen
WINDOW_SECONDS = 1.0  # lag is remembered for one to two windows, so the answer does not flap
RETRY_AFTER_SECONDS = 1
BUSY = 0.75  # of a core: a process running this much is late by its own requests
RECENT_SECONDS = 1.0  # a tenant that asked this lately keeps the last slot from the others


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

    def overdue(self, now: float) -> float:
        """Seconds the watch's wake-up is overdue right now: how far behind the loop is."""
        return max(0.0, now - self._due) if self._due is not None else 0.0

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
    """Requests running at once, at most ``limit``; past it a request waits (``wait`` seconds at
    most) and a freed slot goes to the waiting tenant with the fewest running, the earliest of
    them first: one tenant's queue never stands before another tenant's request. While other
    tenants have asked lately, the last free slot is kept from the tenant running the most.

    The limit follows the loop and the core (``adapt``): each wake-up of the watch later than
    the target cuts it below what is running, by more the later it is (never under ``least``);
    while requests wait, each one on time adds one if the core had time to spare and takes
    one away if it had not (never over ``most``). A CPU-bound process serves no more requests
    a second with 64 running than with a few, but each of them takes as long as all of them.
    """

    def __init__(self, most: int, *, least: int | None = None) -> None:
        self.most = most
        self.least = max(1, min(most, least if least is not None else most))
        self.limit = float(most)
        self.busy = 0
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[_Waiter]] = {}
        self._arrivals = 0
        self._seen: dict[str, float] = {}  # when each tenant last asked for a slot

    async def take(self, wait: float, tenant: str = OPEN) -> bool:
        """True with a slot taken (give it back with ``release``), False when none came."""
        loop = asyncio.get_running_loop()
        self._seen[tenant] = loop.time()
        mine = self._running.get(tenant, 0)
        first = all(self._running.get(t, 0) > mine for t in self._waiting)
        if first and self._may_start(tenant):
            self._start(tenant)  # a free slot, no waiter before it: taken at once
            return True
        if wait <= 0:
            return False
        self._arrivals += 1
        waiter = _Waiter(self._arrivals, loop.create_future())
        self._waiting.setdefault(tenant, deque()).append(waiter)
        waiter.timer = loop.call_later(wait, self._expire, tenant, waiter)
        try:
            return await waiter.future
        except asyncio.CancelledError:  # the request's task is cancelled while it waits
            if waiter.future.done() and not waiter.future.cancelled() and waiter.future.result():
                self.release(tenant)
            else:
                self._drop(tenant, waiter)
            raise

    def release(self, tenant: str = OPEN) -> None:
        self.busy -= 1
        running = self._running[tenant] - 1
        if running:
            self._running[tenant] = running
        else:
            del self._running[tenant]
        self._dispatch()

    def adapt(self, late: float, busy: float, target: float) -> None:
        """After a wake-up of the loop's watch ``late`` seconds late, the process having run
        ``busy`` of the time since the last one: late while it had a core to itself is a queue
        of its own making; late while it had not is the machine's, which fewer would not help."""
        if late > target:
            if busy >= BUSY:  # the later, the fewer: at most half of them at once
                cut = max(0.5, min(0.9, target / late))
                self.limit = max(float(self.least), min(self.limit, self.busy) * cut)
        elif not self._waiting or busy >= BUSY:
            # A process whose core is busy serves no more with more at once, only slower:
            # while requests wait, one fewer a tick until the core has time to spare.
            if self._waiting and self.limit > self.least:
                self.limit = max(float(self.least), self.limit - 1)
        elif self.limit < self.most:
            self.limit = min(float(self.most), self.limit + 1)
            self._dispatch()

    def _start(self, tenant: str) -> None:
        self.busy += 1
        self._running[tenant] = self._running.get(tenant, 0) + 1

    def _may_start(self, tenant: str) -> bool:
        """Whether a slot is free for ``tenant``: the last one not for a tenant running more
        than another that asked lately (alone, a tenant takes them all)."""
        free = int(self.limit) - self.busy
        mine = self._running.get(tenant, 0)
        if free != 1 or not mine:
            return free > 0
        since = asyncio.get_running_loop().time() - RECENT_SECONDS
        return all(
            self._running.get(other, 0) >= mine
            for other, seen in self._seen.items()
            if other != tenant and seen > since
        )

    def _dispatch(self) -> None:
        while self._waiting and self.busy < int(self.limit):
            tenant = min(
                self._waiting, key=lambda t: (self._running.get(t, 0), self._waiting[t][0].order)
            )
            if not self._may_start(tenant):
                return  # the last slot, kept for a tenant with none running
            waiter = self._waiting[tenant].popleft()
            if not self._waiting[tenant]:
                del self._waiting[tenant]
            if waiter.timer is not None:
                waiter.timer.cancel()
            self._start(tenant)
            waiter.future.set_result(True)

    def _expire(self, tenant: str, waiter: _Waiter) -> None:
        if not waiter.future.done():
            self._drop(tenant, waiter)
            waiter.future.set_result(False)

    def _drop(self, tenant: str, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]


@dataclass(eq=False, slots=True)
class _Waiter:
    order: int  # arrival: the earliest of a tenant's waiters is served first
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = None


class Admission:
    """Pure ASGI middleware, inside the gate (which knows the key's tenant): each ``/v1``
    request's body read first, then its tenant's share, then a slot; the loop's watch over
    the lifespan."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_in_flight: int,
        queue_seconds: float,
        lag_seconds: float,
        min_in_flight: int | None = None,
        loop_target_seconds: float = math.inf,
        tenants: Tenants | None = None,
        max_body_bytes: int = 1024 * 1024,
        late_seconds: float = math.inf,
    ) -> None:
        self.app = app
        self.slots = Slots(max_in_flight, least=min_in_flight)
        self.loop_target_seconds = loop_target_seconds
        self.queue_seconds = queue_seconds
        self.lag_seconds = lag_seconds
        self.meter = LagMeter()
        self.tenants = tenants or Tenants(Policy(), max_body_bytes=sys.maxsize)
        self.max_body_bytes = max_body_bytes
        self.late_seconds = late_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http" or not scope["path"].startswith(_ADMITTED):
            await self.app(scope, receive, send)
            return
        tenant: str = scope.get(TENANT, OPEN)
        size = self._announced(scope)
        refusal = self.tenants.hold_bytes(tenant, size)
        if refusal is not None:
            await self._refuse(send, tenant, refusal, unread=True)
            return
        try:
            # A body that never comes holds nothing but its bytes: the server's body deadline
            # ends it, and no slot is taken before it is here.
            body = await read_body(receive)
            if body is None:
                return  # the client left (or was cut off): nothing to answer
            await self._admit(scope, replay(body, receive), send, tenant)
        finally:
            self.tenants.free_bytes(tenant, size)

    async def _admit(self, scope: Scope, receive: Receive, send: Send, tenant: str) -> None:
        now = asyncio.get_running_loop().time()
        # The request arrived when its last byte was read (the server says when), however
        # late the loop came to it: the load path's limits count from then.
        arrived = min(now, scope.get(RECEIVED, now))
        scope[ARRIVED] = arrived
        # A loop that is behind reads its sockets that late too: a request read now may have
        # waited that long unseen. Past the bound, the tenants sending the most are refused
        # at once (a refusal is the cheapest answer), which gives the loop back its time.
        behind = now - arrived + self.meter.overdue(now)
        if behind > self.late_seconds and (
            now - arrived > self.late_seconds or self.tenants.over_equal_share(tenant, now)
        ):
            await self._refuse(send, tenant, _LATE)
            return
        # A lagging loop sheds the long-term search of the tenants sending the most, and most
        # of their share of requests in flight.
        lagging = self.meter.lag(now) > self.lag_seconds
        shed = lagging and self.tenants.over_equal_share(tenant, now)
        refusal = self.tenants.enter(tenant, now, squeezed=shed)
        if refusal is not None:
            await self._refuse(send, tenant, refusal)
            return
        label = self.tenants.label(tenant)
        try:
            metrics.TENANT_IN_FLIGHT.labels(label).set(self.tenants.in_flight(tenant))
            scope[LAGGING] = shed
            if not await self.slots.take(self.queue_seconds, tenant):
                metrics.OVERLOAD.labels("refused", "in_flight").inc()
                await self._refuse(send, tenant, _NO_SLOT)
                return
            outcome = "degraded" if scope[LAGGING] else "admitted"
            metrics.TENANT_REQUESTS.labels(label, outcome).inc()
            held = True

            async def started(message: Message) -> None:
                nonlocal held
                if held and message["type"] == "http.response.start" and scope.get(STREAMING):
                    held = False
                    self.slots.release(tenant)
                await send(message)

            try:
                await self.app(scope, receive, started)
            finally:
                if held:
                    self.slots.release(tenant)
        finally:
            self.tenants.leave(tenant)
            metrics.TENANT_IN_FLIGHT.labels(label).set(self.tenants.in_flight(tenant))

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
        then, cpu = loop.time(), time.process_time()
        while True:
            self.meter.expect(loop.time() + TICK_SECONDS)
            await asyncio.sleep(TICK_SECONDS)
            now, used = loop.time(), time.process_time()
            busy = (used - cpu) / max(now - then, 1e-6)
            self.slots.adapt(self.meter.overdue(now), busy, self.loop_target_seconds)
            then, cpu = now, used
            self.meter.woke(now)
            metrics.API_RUNNING_LIMIT.set(int(self.slots.limit))
            metrics.LOOP_LAG.set(self.meter.lag(now))

    def _announced(self, scope: Scope) -> int:
        """The body bytes a request will hold: its Content-Length (the gate refused one over
        the limit), the limit for a body of unknown length, none without either."""
        length = b""
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                return self.max_body_bytes
        return int(length) if length.isdigit() else 0

    async def _refuse(
        self, send: Send, tenant: str, refusal: Refusal, *, unread: bool = False
    ) -> None:
        metrics.TENANT_REQUESTS.labels(self.tenants.label(tenant), refusal.reason).inc()
        if refusal.status == 503 and refusal is not _NO_SLOT:
            metrics.OVERLOAD.labels("refused", refusal.reason).inc()
        await _refuse(send, refusal, close=unread)


_OVER = f"the server is over capacity; retry after {RETRY_AFTER_SECONDS} s"
_NO_SLOT = Refusal(503, "process", RETRY_AFTER_SECONDS, _OVER)
_LATE = Refusal(503, "late", RETRY_AFTER_SECONDS, _OVER)


async def read_body(receive: Receive) -> bytes | None:
    """The whole body, or None when the client left before it was sent."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` once, then what the connection sends (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def _refuse(send: Send, refusal: Refusal, *, close: bool) -> None:
    code = "overloaded" if refusal.status == 503 else "too_many_requests"
    body = orjson.dumps(error_body(code, refusal.message))
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(refusal.retry_after).encode()),
    ]
    if close:  # the unread body would otherwise be taken for the next request
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
