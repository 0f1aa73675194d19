"""What an API process does once before it reports ready, so that its first requests do not
(and the overload rule for a late loop does not shed them). Why: docs/design/api-startup.md."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Message

from memstream.api.services import Services
from memstream.store.database import ping
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
        async with asyncio.timeout(CONNECT_SECONDS):
            await ping(engine)
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
