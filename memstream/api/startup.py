"""What an API process does once before it reports ready, so that its first requests do not.

A process that just started held its event loop at its first requests, on a quiet machine
too, and the overload rule for a late loop shed the long-term part of its first seconds of
``/v1/context`` answers (``degraded``: ``long_term``). Each piece of one-time work behind it is
done here instead, while startup may hold the loop (the loop's watch starts after it):

- FastAPI builds every route's dependency tree and models when the first request is matched
  against them (``/healthz`` included, its routes coming after ``/v1``'s): 0.1 s of CPU. One
  request that matches no route builds them all.
- The token counter's encoding decodes 100,000 ranks (0.25 s of CPU) when the first answer
  with long-term memories is budgeted: it is loaded here, in a thread beside the connections.
- The database pools' first connection runs the dialect's first-connect queries, and the
  cache's its handshake: both are opened once.
- A full collection of the garbage collector walks every object the imports made (125,000,
  0.1 s of CPU), the first some 6 s after startup: they are collected once, then frozen
  (``gc.freeze``), so that later full collections walk only what serving made.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Message

from memstream.api.services import Services
from memstream.text import tokens

log = logging.getLogger(__name__)

CONNECT_SECONDS = 5.0  # a service away at startup is the first requests' to meet, not startup's
# A path no route has: matching it walks every route, which builds each one's state.
_NOWHERE = "/\x00startup"


async def prepare(router: ASGIApp, services: Services) -> None:
    """Build the routes' state, open the connections, then collect and freeze the heap."""
    await build_routes(router)
    engines = {id(engine): engine for engine in (services.engine, services.reader)}
    await asyncio.gather(
        *(_connect(engine) for engine in engines.values()),
        _ping(services),
        asyncio.to_thread(tokens.encoding),
    )
    freeze_heap()


async def build_routes(router: ASGIApp) -> None:
    """One request through ``router`` that matches no route, so every route is built."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": _NOWHERE,
        "raw_path": _NOWHERE.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": None,
        "server": None,
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        return None

    await router(scope, receive, send)


def freeze_heap() -> None:
    """Collect once, then keep what is left out of every later collection (once a process)."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


async def _connect(engine: AsyncEngine) -> None:
    try:
        async with asyncio.timeout(CONNECT_SECONDS), engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        log.warning("database not reached at startup (%r): the first requests will try", exc)


async def _ping(services: Services) -> None:
    if services.cache is None:
        return
    try:
        async with asyncio.timeout(CONNECT_SECONDS):
            await services.cache.ping()
    except Exception as exc:
        log.warning("cache not reached at startup (%r): the first requests will try", exc)
