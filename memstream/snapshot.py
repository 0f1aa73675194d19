"""Views of the cluster an API process computes at most once every few seconds: ``/readyz``'s
worker groups and the dashboard's pipeline panel each open Kafka clients (and the panel reads
dead letters), so a caller that could ask in a loop would load the broker.

A :class:`Snapshot` keeps the last value for ``MEMSTREAM_API_SNAPSHOT_SECONDS``; past that, the
first caller starts a refresh and every caller that comes while it runs awaits the same one.
A failed refresh is not kept: the next caller tries again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from memstream.metrics import SNAPSHOTS

T = TypeVar("T")


class Snapshot(Generic[T]):
    """The value of ``compute``, kept for ``seconds``, with at most one refresh in flight."""

    def __init__(
        self,
        view: str,
        compute: Callable[[], Awaitable[T]],
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view = view
        self.seconds = seconds
        self.computed = 0
        self._compute = compute
        self._clock = clock
        self._value: tuple[float, T] | None = None
        self._refresh: asyncio.Future[T] | None = None

    async def get(self) -> T:
        """The kept value while it is fresh, else the refresh in flight (started if none)."""
        kept = self._value
        if kept is not None and self._clock() - kept[0] < self.seconds:
            return kept[1]
        if self._refresh is None:
            self._refresh = asyncio.ensure_future(self._run())
            # Retrieved here too, so a refresh whose callers all went away logs nothing.
            self._refresh.add_done_callback(_retrieve)
        # Shielded: one caller cancelled (a client that hung up) must not cancel the others'.
        return await asyncio.shield(self._refresh)

    async def _run(self) -> T:
        try:
            self.computed += 1
            SNAPSHOTS.labels(self.view).inc()
            value = await self._compute()
            self._value = (self._clock(), value)
            return value
        finally:
            self._refresh = None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def process_snapshot(
    state: Any, view: str, compute: Callable[[], Awaitable[T]], seconds: float
) -> Snapshot[T]:
    """The process's snapshot of ``view``, kept on the app's ``state``: made on first use, with
    that call's ``compute`` (later calls' are not used)."""
    found: Snapshot[T] | None = getattr(state, f"snapshot_{view}", None)
    if found is None:
        found = Snapshot(view, compute, seconds)
        setattr(state, f"snapshot_{view}", found)
    return found
