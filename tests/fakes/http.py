"""What the fake servers share: the in-thread server, the record of a request, the state and
knobs of a fake memory server, relevance."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import uvicorn
from fastapi.responses import JSONResponse, Response

from tests.support.settings import free_port


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI ``app`` under uvicorn on 127.0.0.1 and a free port, in a thread; yields
    its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the local test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class Seen:
    """One request as a fake server received it."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


@dataclass
class MemoryServerState:
    """A fake memory server's memories by id, every request it saw, and the knobs for the
    misbehaviour both MemOS and Mem0 show, by route."""

    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    delay: dict[str, float] = field(default_factory=dict)  # route -> seconds before answering
    http_error: dict[str, int] = field(default_factory=dict)  # route -> HTTP status
    fail_next: dict[str, int] = field(default_factory=dict)  # route -> 503s before it works
    malformed: set[str] = field(default_factory=set)  # routes answering a broken shape
    store_then_fail: bool = False  # the next add stores, then answers 503
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def reset(self) -> None:
        fresh = type(self)()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    async def misbehave(self, route: str) -> Response | None:
        """What the knobs make ``route`` answer now (after its delay), or None: serve it."""
        if route in self.delay:
            await asyncio.sleep(self.delay[route])
        if self.fail_next.get(route):
            self.fail_next[route] -= 1
            return JSONResponse({"detail": "temporarily unavailable"}, 503)
        if route in self.http_error:
            return JSONResponse({"detail": "server error"}, self.http_error[route])
        return None

    def store(self, prefix: str, text: str, age_seconds: int, **fields: Any) -> str:
        """Keep a memory created ``age_seconds`` before 2026-01-01 under a new id."""
        memory_id = f"{prefix}-{next(self.counter)}"
        created = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(seconds=age_seconds)
        self.memories[memory_id] = {
            "id": memory_id,
            "memory": text,
            "created_at": created.isoformat(),
            **fields,
        }
        return memory_id


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def relevance(query: str, text: str) -> float:
    """The share of the query's words in ``text``: the fake memory servers' search score."""
    wanted = words(query)
    return len(wanted & words(text)) / len(wanted) if wanted else 0.0
