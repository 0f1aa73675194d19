"""Each tenant's share of a process, without a server: token buckets, requests in flight, body
bytes, the equal share a lagging loop sheds, and admission reading the body before a slot."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from memstream.api.auth import TENANT
from memstream.api.fairness import MAX_LABELS, OTHER, Policy, Tenants, TokenBucket
from memstream.api.overload import STREAMING, Admission
from memstream.api.server import RECEIVED
from memstream.settings import Settings


def test_a_bucket_gives_its_burst_then_one_token_per_interval() -> None:
    bucket = TokenBucket(rate=2, capacity=2, now=100.0)
    assert bucket.take(100.0) == 0 and bucket.take(100.0) == 0
    assert bucket.take(100.0) == pytest.approx(0.5)  # the next token in half a second
    assert bucket.take(100.25) == pytest.approx(0.25)  # a refusal takes nothing
    assert bucket.take(100.5) == 0
    assert bucket.take(110.0) == 0 and bucket.take(110.0) == 0  # never more than the burst
    assert bucket.take(110.0) > 0


def test_a_tenant_over_its_rate_is_refused_with_when_to_come_back() -> None:
    tenants = Tenants(Policy(rate=1, rate_overrides={"big": 100}), max_body_bytes=10**9)
    assert tenants.enter("small", 0.0) is None
    refusal = tenants.enter("small", 0.1)
    assert refusal is not None and refusal.status == 429 and refusal.reason == "rate"
    assert refusal.retry_after == 1
    # Another tenant is not held back by it; an override gives its own share.
    assert all(tenants.enter("big", 0.1) is None for _ in range(100))
    assert tenants.enter("big", 0.1) is not None


def test_a_slow_rate_says_to_come_back_in_whole_seconds() -> None:
    tenants = Tenants(Policy(rate=0.25), max_body_bytes=10**9)
    assert tenants.enter("t", 0.0) is None
    refusal = tenants.enter("t", 0.0)
    assert refusal is not None and refusal.retry_after == 4


def test_requests_in_flight_are_limited_per_tenant_and_freed_on_leaving() -> None:
    tenants = Tenants(
        Policy(max_in_flight=2, in_flight_overrides={"wide": 0}), max_body_bytes=10**9
    )
    assert tenants.enter("a", 0) is None and tenants.enter("a", 0) is None
    refusal = tenants.enter("a", 0)
    assert refusal is not None and (refusal.status, refusal.reason) == (429, "in_flight")
    assert tenants.enter("b", 0) is None  # b's share is its own
    tenants.leave("a")
    assert tenants.enter("a", 0) is None
    assert all(tenants.enter("wide", 0) is None for _ in range(50))  # 0: no own limit


def test_body_bytes_are_held_per_tenant_then_per_process() -> None:
    tenants = Tenants(Policy(max_body_bytes=100), max_body_bytes=150)
    assert tenants.hold_bytes("a", 80) is None
    over = tenants.hold_bytes("a", 30)
    assert over is not None and over.status == 429
    assert tenants.hold_bytes("b", 60) is None
    full = tenants.hold_bytes("c", 20)
    assert full is not None and full.status == 503
    tenants.free_bytes("a", 80)
    assert tenants.hold_bytes("c", 20) is None


def test_the_equal_share_is_the_loud_tenant_only_and_a_lone_tenant_always() -> None:
    tenants = Tenants(Policy(), max_body_bytes=10**9)
    assert tenants.over_equal_share("first", 10.0)  # nobody sent anything: alone
    for _ in range(5):
        tenants.enter("alone", 10.0)
    assert tenants.over_equal_share("alone", 10.2)
    for _ in range(50):
        tenants.enter("loud", 10.3)
    tenants.enter("quiet", 10.4)
    assert tenants.over_equal_share("loud", 10.5)
    assert not tenants.over_equal_share("quiet", 10.5)
    assert not tenants.over_equal_share("alone", 10.5)
    # Two windows on, the old counts are forgotten.
    tenants.enter("quiet", 12.5)
    assert tenants.over_equal_share("quiet", 12.6)


def test_metrics_labels_are_bounded() -> None:
    tenants = Tenants(Policy(), max_body_bytes=10**9)
    labels = {tenants.label(f"t{n}") for n in range(MAX_LABELS + 50)}
    assert len(labels) == MAX_LABELS + 1 and OTHER in labels
    assert tenants.label("t1") == "t1"


def test_tenant_overrides_are_read_from_the_settings_and_bad_ones_refused() -> None:
    settings = Settings(
        api_tenant_rate_overrides="acme=200, beta=0.5",
        api_tenant_max_in_flight_overrides="acme=8",
    )
    assert settings.tenant_rate_overrides == {"acme": 200.0, "beta": 0.5}
    assert settings.tenant_in_flight_overrides == {"acme": 8}
    for bad in ("acme", "acme=fast", "acme=-1", "=3"):
        with pytest.raises(ValueError, match="tenant=number"):
            Settings(api_tenant_rate_overrides=bad)


def admission(tenants: Tenants, started: asyncio.Event, release: asyncio.Event) -> Admission:
    async def slow(request: Request) -> JSONResponse:
        body = await request.body()
        started.set()
        await release.wait()
        return JSONResponse({"size": len(body)})

    app = Starlette(routes=[Route("/v1/slow", slow, methods=["POST"])])

    async def keyed(scope, receive, send):  # type: ignore[no-untyped-def]
        # As the gate does: the tenant of the request's key in the scope.
        if scope["type"] == "http":
            scope[TENANT] = dict(scope["headers"]).get(b"x-tenant", b"-").decode()
        await inner(scope, receive, send)

    inner = Admission(app, max_in_flight=1, queue_seconds=0, lag_seconds=1, tenants=tenants)
    return keyed  # type: ignore[return-value]


async def test_a_body_still_on_its_way_takes_no_slot() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    tenants = Tenants(Policy(), max_body_bytes=10**9)
    app = admission(tenants, started, release)
    more, reading = asyncio.Event(), asyncio.Event()

    async def dribble():  # type: ignore[no-untyped-def]
        yield b"{"
        # Asked for the next part: admission holds the first and is reading the body.
        reading.set()
        await more.wait()
        yield b"}"

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        stalled = asyncio.create_task(
            client.post("/v1/slow", content=dribble(), headers={"x-tenant": "loud"})
        )
        await asyncio.wait_for(reading.wait(), 5)
        # The process has one slot; the stalled body holds it not.
        release.set()
        served = await client.post("/v1/slow", content=b"{}", headers={"x-tenant": "quiet"})
        more.set()
        finished = await stalled
    assert served.status_code == 200
    assert finished.status_code == 200 and finished.json() == {"size": 2}
    assert tenants.body_bytes == 0 and tenants.in_flight("loud") == 0


async def test_a_tenant_over_its_body_bytes_is_refused_before_its_body_is_read() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    release.set()
    tenants = Tenants(Policy(max_body_bytes=2048), max_body_bytes=10**9)
    transport = httpx.ASGITransport(app=admission(tenants, started, release))
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        refused = await client.post("/v1/slow", content=b"x" * 4096, headers={"x-tenant": "a"})
        served = await client.post("/v1/slow", content=b"x" * 1024, headers={"x-tenant": "a"})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert served.status_code == 200


async def test_a_request_read_too_late_to_answer_in_time_is_refused_at_once() -> None:
    async def ok(_: Request) -> JSONResponse:
        return JSONResponse({})

    app = Starlette(routes=[Route("/v1/ok", ok)])
    inner = Admission(app, max_in_flight=4, queue_seconds=0, lag_seconds=1, late_seconds=0.25)
    waited = 0.0

    async def read_when(scope, receive, send):  # type: ignore[no-untyped-def]
        # As the server does: when the request's last byte was read.
        if scope["type"] == "http":
            scope[RECEIVED] = asyncio.get_running_loop().time() - waited
        await inner(scope, receive, send)

    transport = httpx.ASGITransport(app=read_when)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        fresh = await client.get("/v1/ok")
        waited = 0.5
        late = await client.get("/v1/ok")
    assert fresh.status_code == 200
    assert late.status_code == 503 and late.headers["retry-after"] == "1"
    assert late.json()["error"]["code"] == "overloaded"
    assert inner.tenants.in_flight("-") == 0


def test_a_squeezed_tenant_keeps_a_quarter_of_its_requests_in_flight() -> None:
    tenants = Tenants(Policy(max_in_flight=8), max_body_bytes=10**9)
    assert all(tenants.enter("loud", 0, squeezed=True) is None for _ in range(2))
    refusal = tenants.enter("loud", 0, squeezed=True)
    assert refusal is not None and (refusal.status, refusal.reason) == (429, "in_flight")
    assert tenants.enter("loud", 0) is None  # not squeezed: its whole share


async def test_a_streamed_answer_gives_its_slot_back_once_it_starts() -> None:
    """An export streams for seconds: the process slot is free once its answer has started,
    while the tenant's share still counts the stream until it ends."""
    more = asyncio.Event()

    async def stream(request: Request) -> StreamingResponse:
        async def lines():  # type: ignore[no-untyped-def]
            yield b"{}\n"
            await more.wait()
            yield b"{}\n"

        request.scope[STREAMING] = request.url.path.endswith("stream")
        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def quick(request: Request) -> JSONResponse:
        return JSONResponse({})

    routes = [Route(path, stream) for path in ("/v1/stream", "/v1/held")]
    app = Starlette(routes=[*routes, Route("/v1/quick", quick)])
    tenants = Tenants(Policy(), max_body_bytes=10**9)
    admitted = Admission(app, max_in_flight=1, queue_seconds=0, lag_seconds=1, tenants=tenants)

    async def keyed(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            scope[TENANT] = "t1"
        await admitted(scope, receive, send)

    async def call(path: str, first_line: asyncio.Event | None = None) -> int:
        """The answer's status; ``first_line`` is set once its first body part is sent (httpx's
        ASGI transport would wait for the whole body)."""
        status = 0
        sent = asyncio.Event()
        requested = False

        async def receive():  # type: ignore[no-untyped-def]
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await sent.wait()  # the client stays until the answer is complete
            return {"type": "http.disconnect"}

        async def send(message):  # type: ignore[no-untyped-def]
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                if first_line is not None and message.get("body"):
                    first_line.set()
                if not message.get("more_body", False):
                    sent.set()

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "headers": [(b"host", b"memstream")], "server": ("memstream", 80),
            "client": ("127.0.0.1", 1),
        }  # fmt: skip
        await keyed(scope, receive, send)
        return status

    for path, quick_status in (("/v1/stream", 200), ("/v1/held", 503)):
        more.clear()
        first_line = asyncio.Event()
        streamed = asyncio.create_task(call(path, first_line))
        await asyncio.wait_for(first_line.wait(), 5)
        assert tenants.in_flight("t1") == 1
        assert await call("/v1/quick") == quick_status
        more.set()
        assert await streamed == 200
    assert admitted.slots.busy == 0 and tenants.in_flight("t1") == 0
