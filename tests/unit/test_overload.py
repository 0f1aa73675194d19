"""Admission control without services: the loop's lag meter, the slots, the 503 they give."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message

from memstream.api.overload import ARRIVED, LAGGING, Admission, LagMeter, Slots
from tests.support.waiting import eventually


def wakes(*times: tuple[float, float]) -> LagMeter:
    """A meter that has seen the watch wake up at these (expected, actual) times."""
    meter = LagMeter(window=1.0)
    for due, at in times:
        meter.expect(due)
        meter.woke(at)
    return meter


def test_a_loop_on_time_has_no_lag() -> None:
    assert wakes((10.05, 10.05)).lag(10.06) == 0.0


def test_a_late_wake_up_is_remembered_for_the_next_window_then_forgotten() -> None:
    assert abs(wakes((10.05, 10.35)).lag(10.4) - 0.3) < 1e-9
    # The window before still counts, the one before that no longer.
    assert abs(wakes((10.05, 10.35), (11.05, 11.05)).lag(11.5) - 0.3) < 1e-9
    assert wakes((10.05, 10.35), (11.05, 11.05), (12.05, 12.05)).lag(12.1) == 0.0


def test_a_wake_up_overdue_now_counts_before_it_happens() -> None:
    meter = LagMeter(window=1.0)
    meter.expect(10.05)
    assert meter.lag(10.04) == 0.0
    assert abs(meter.lag(10.55) - 0.5) < 1e-9


def test_a_long_quiet_spell_forgets_old_lag() -> None:
    assert wakes((10.05, 10.5), (15.05, 15.05)).lag(15.1) == 0.0


async def test_slots_refuse_past_the_limit_at_once_without_a_wait() -> None:
    slots = Slots(1)
    assert await slots.take(0)
    assert not await slots.take(0)
    assert not await slots.take(0.01)  # held all along: the wait runs out
    slots.release()
    assert await slots.take(0) and slots.busy == 1


async def test_a_slot_given_back_within_the_wait_is_taken() -> None:
    slots = Slots(1)
    assert await slots.take(0)
    waiting = asyncio.create_task(slots.take(30))
    await asyncio.sleep(0)
    assert not waiting.done()
    slots.release()
    assert await waiting and slots.busy == 1


async def test_a_freed_slot_goes_to_the_waiting_tenant_with_the_fewest_running() -> None:
    slots = Slots(2)
    assert await slots.take(0, "loud") and await slots.take(0, "loud")
    loud = [asyncio.create_task(slots.take(30, "loud")) for _ in range(3)]
    await asyncio.sleep(0)
    quiet = asyncio.create_task(slots.take(30, "quiet"))  # after the loud tenant's queue
    await asyncio.sleep(0)
    slots.release("loud")
    await asyncio.sleep(0)
    assert quiet.done() and await quiet and not any(t.done() for t in loud)
    slots.release("loud")
    await asyncio.sleep(0)
    assert [t.done() for t in loud] == [True, False, False]  # then the loud, in order
    slots.release("quiet")
    slots.release("loud")
    await asyncio.sleep(0)
    # The quiet tenant asked lately: the last slot is kept from the tenant running the most.
    assert [t.done() for t in loud] == [True, True, False] and slots.busy == 1
    assert await slots.take(0, "quiet") and slots.busy == 2
    slots.release("quiet")
    slots.release("loud")
    assert all(await asyncio.gather(*loud)) and slots.busy == 1


async def test_a_tenant_alone_takes_every_slot() -> None:
    slots = Slots(3)
    assert all([await slots.take(0, "only") for _ in range(3)]) and slots.busy == 3


async def test_the_last_slot_goes_to_a_tenant_running_no_more_than_the_others() -> None:
    slots = Slots(4)
    assert all([await slots.take(0, "loud") for _ in range(2)])
    assert await slots.take(0, "quiet")  # none running: a slot at once
    assert await slots.take(0, "quiet")  # the last one: it runs no more than the loud one
    slots.release("quiet")
    assert not await slots.take(0, "loud")  # the last one, from the tenant running the most
    assert await slots.take(0, "quiet")


async def test_a_wait_that_runs_out_leaves_the_queue() -> None:
    slots = Slots(1)
    assert await slots.take(0, "a")
    assert not await slots.take(0.01, "b")
    slots.release("a")
    assert slots.busy == 0 and await slots.take(0, "c")


async def test_a_cancelled_waiter_leaves_the_queue_and_a_given_slot_goes_back() -> None:
    slots = Slots(1)
    assert await slots.take(0, "a")
    waiting = asyncio.create_task(slots.take(30, "b"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.release("a")
    assert slots.busy == 0
    # Given the slot and cancelled before it ran: the slot comes back.
    assert await slots.take(0, "a")
    given = asyncio.create_task(slots.take(30, "b"))
    await asyncio.sleep(0)
    slots.release("a")  # hands the slot to the waiter
    given.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given
    assert slots.busy == 0


async def test_a_late_busy_loop_runs_fewer_and_one_on_time_with_a_queue_and_a_spare_core_more() -> (
    None
):
    slots = Slots(16, least=4)
    for _ in range(10):
        assert await slots.take(0, "t")
    slots.adapt(late=0.1, busy=0.95, target=0.025)  # 4x late: halved, from what runs
    assert slots.limit == 5
    slots.adapt(late=0.1, busy=0.3, target=0.025)  # late, but the machine's doing: held
    assert slots.limit == 5
    slots.limit = 8
    slots.adapt(late=0.03, busy=0.95, target=0.025)  # a little late: a little off
    assert round(slots.limit, 2) == round(8 * 0.025 / 0.03, 2)
    for _ in range(10):
        slots.release("t")
    for _ in range(10):
        slots.adapt(late=0.1, busy=1.0, target=0.025)
    assert slots.limit == 4
    slots.adapt(late=0.0, busy=1.0, target=0.025)  # on time, nobody waiting: held
    assert slots.limit == 4
    for _ in range(4):
        assert await slots.take(0, "t")
    waiting = asyncio.create_task(slots.take(30, "t"))
    await asyncio.sleep(0)
    slots.adapt(late=0.0, busy=1.0, target=0.025)  # on time, but the core is busy: held
    assert slots.limit == 4 and not waiting.done()
    slots.adapt(late=0.0, busy=0.5, target=0.025)  # on time with a core to spare: one more
    assert slots.limit == 5 and await waiting and slots.busy == 5


async def test_a_busy_core_with_a_queue_runs_one_fewer_a_tick_down_to_the_least() -> None:
    # More at once on a busy core only makes each slower: on time or not, while requests wait
    # and the core is busy, the limit comes down a step at a time.
    slots = Slots(8, least=4)
    for _ in range(8):
        assert await slots.take(0, "t")
    waiting = asyncio.create_task(slots.take(30, "u"))
    await asyncio.sleep(0)
    for expected in (7, 6, 5, 4, 4):
        slots.adapt(late=0.0, busy=0.9, target=0.025)
        assert slots.limit == expected
    for _ in range(5):
        slots.release("t")  # 3 run: the waiter's turn under the limit of 4
    assert await waiting and slots.busy == 4


def admitted(
    release: asyncio.Event, started: asyncio.Event, *, lag_seconds: float = 0.1
) -> tuple[httpx.AsyncClient, Admission]:
    async def slow(request: Request) -> JSONResponse:
        started.set()
        await release.wait()
        return JSONResponse({"lagging": request.scope[LAGGING], "arrived": request.scope[ARRIVED]})

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/v1/slow", slow), Route("/healthz", healthz)])
    admission = Admission(app, max_in_flight=1, queue_seconds=0, lag_seconds=lag_seconds)
    transport = httpx.ASGITransport(app=admission)
    return httpx.AsyncClient(transport=transport, base_url="http://memstream"), admission


async def test_a_request_past_the_slots_is_refused_with_retry_after_and_health_is_not() -> None:
    release, started = asyncio.Event(), asyncio.Event()
    client, _ = admitted(release, started)
    async with client:
        first = asyncio.create_task(client.get("/v1/slow"))
        await started.wait()
        refused = await client.get("/v1/slow")
        health = await client.get("/healthz")
        release.set()
        served = await first
        again = await client.get("/v1/slow")
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "overloaded"
    assert health.status_code == 200
    assert served.status_code == 200 and again.status_code == 200
    assert served.json()["lagging"] is False


async def test_a_lagging_loop_marks_the_request() -> None:
    release, started = asyncio.Event(), asyncio.Event()
    release.set()
    client, admission = admitted(release, started)
    now = asyncio.get_running_loop().time()
    admission.meter.expect(now - 0.5)
    admission.meter.woke(now)
    async with client:
        answer = await client.get("/v1/slow")
    assert answer.status_code == 200 and answer.json()["lagging"] is True


def hold(seconds: float) -> None:
    """Keep the loop from running, as a long callback does."""
    time.sleep(seconds)


async def lifespan_started(app: Admission) -> tuple[asyncio.Task[None], asyncio.Queue[Message]]:
    """``app``'s lifespan run up to its startup's end, as a server runs it before serving."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
    running = asyncio.create_task(app(scope, inbox.get, outbox.put))
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    return running, inbox


async def test_startup_holding_the_loop_is_not_lag_but_a_hold_once_serving_is() -> None:
    @asynccontextmanager
    async def startup(_: Starlette) -> AsyncIterator[None]:
        await asyncio.sleep(0)  # a connection opened, say
        hold(0.3)  # then one-time work done before serving, on purpose
        yield

    async def probe(request: Request) -> JSONResponse:
        return JSONResponse({"lagging": request.scope[LAGGING]})

    app = Starlette(routes=[Route("/v1/probe", probe)], lifespan=startup)
    admission = Admission(app, max_in_flight=4, queue_seconds=0, lag_seconds=0.1)
    running, inbox = await lifespan_started(admission)
    transport = httpx.ASGITransport(app=admission)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        first = await client.get("/v1/probe")

        async def watching() -> bool:  # the watch is waiting for its next wake-up
            return admission.meter._due is not None

        await eventually(watching, within=5, what="the loop's watch running")
        hold(0.3)  # a callback holding the loop while serving
        held = await client.get("/v1/probe")
    await inbox.put({"type": "lifespan.shutdown"})
    await running
    assert first.json()["lagging"] is False
    assert held.json()["lagging"] is True
