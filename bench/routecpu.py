"""What ``POST /v1/context``'s route costs the API's CPU beside the load path: the whole ASGI
stack of ``memstream api`` (the gate, admission, FastAPI, the route) called in this process
with the load path answering a fixed context, so neither sockets nor services are measured.
The route's own handler (a JSON body, validated once) against FastAPI's handling of the same
route (the same body sent as ``application/merge+json``, which the handler leaves to FastAPI:
its body parse, validation and dependencies), in turns, in the same run. Each figure is the
median of ``ROUNDS`` rounds of ``REQUESTS`` requests (process CPU time).
``python -m bench routecpu``."""

from __future__ import annotations

import asyncio
import statistics
import time
from types import SimpleNamespace
from typing import Any

import orjson

from memstream.api.app import create_app
from memstream.settings import Settings
from memstream_client.contract.api import ContextRequest, ContextResponse
from tests.support.api import empty_context

ROUNDS = 9
REQUESTS = 2000
BODY = orjson.dumps(
    {"tenant_id": "acme", "user_id": "u1", "conversation_id": "c1", "query": "dinner plans?"}
)


class FixedAnswer:
    """The load path, answering every request with the same empty context."""

    async def context(
        self, req: ContextRequest, *, arrived: float | None, with_long_term: bool
    ) -> ContextResponse:
        return empty_context(req.conversation_id)


def _scope(content_type: bytes) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", content_type),
        (b"authorization", b"Bearer bench-key"),
        (b"content-length", str(len(BODY)).encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/context",
        "raw_path": b"/v1/context",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }


async def _one(app: Any, content_type: bytes) -> None:
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if given:  # nothing more comes: the connection stays open
            await asyncio.Event().wait()
        given = True
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(_scope(content_type), receive, send)
    if sent[0]["status"] != 200:
        raise SystemExit(f"routecpu: the route answered {sent[0]['status']}: {sent}")


async def _round(app: Any, content_type: bytes) -> float:
    started = time.process_time()
    for _ in range(REQUESTS):
        await _one(app, content_type)
    return (time.process_time() - started) / REQUESTS * 1e6


async def main() -> None:
    settings = Settings(
        api_keys="bench-key:acme", database_url="sqlite+aiosqlite:///:memory:", redis_url=""
    )
    app = create_app(settings)
    app.state.services = SimpleNamespace(loadpath=FixedAnswer())
    ways = {
        "the route's handler": b"application/json",
        "FastAPI's handling": b"application/merge+json",
    }
    for content_type in ways.values():  # warm: models built, caches filled
        for _ in range(300):
            await _one(app, content_type)
    took: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(ROUNDS):
        for name, content_type in ways.items():
            took[name].append(await _round(app, content_type))
    print(f"routecpu: POST /v1/context through the ASGI stack, {ROUNDS} x {REQUESTS} requests")
    handler, framework = (statistics.median(took[name]) for name in ways)
    for name, figures in took.items():
        print(f"  {name:<20} {statistics.median(figures):7.1f} us/request (min {min(figures):.1f})")
    print(f"  the handler / FastAPI's handling: {handler / framework:.2f}")
