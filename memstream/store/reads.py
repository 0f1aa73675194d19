"""Where the API's reads go: the read replica (``MEMSTREAM_DATABASE_READ_URL``), except for a
user whose memories this process changed within the last few seconds, read on the primary.
Why it works this way: docs/design/read-replicas.md."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from prometheus_client import Gauge
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

LAG = Gauge(
    "memstream_database_replica_lag_seconds",
    "The read replica's lag behind the primary at its last check (NaN: unknown).",
)
ON_PRIMARY = Gauge(
    "memstream_database_replica_bypassed",
    "1 while the read replica's lag is over the limit or unknown and reads go to the primary.",
)
CHECK_TIMEOUT_SECONDS = 2.0

MAX_TRACKED = 100_000
"""Users (and tenants) remembered as recently written; the oldest are dropped first, which
only sends their reads back to the replica early."""


def lag_of(statuses: list[Mapping[str, Any]]) -> float | None:
    """The lag in seconds that replication status rows say (one per source), None when any
    source is not replicating (the server's NULL) or the server is no replica at all."""
    if not statuses:
        return None
    lags = []
    for status in statuses:
        value = status.get("Seconds_Behind_Master", status.get("Seconds_Behind_Source"))
        if value is None:
            return None
        lags.append(float(value))
    return max(lags)


class ReplicaLag:
    """The read replica's lag, read every ``every`` seconds; ``usable`` says whether reads may
    go to the replica now."""

    def __init__(self, replica: AsyncEngine, *, max_seconds: float, every: float) -> None:
        self.replica = replica
        self.max_seconds = max_seconds
        self.every = every
        self.seconds: float | None = None  # at the last check; None: unknown
        self._checked = -math.inf  # monotonic time of the last answered check
        self._statement = "SHOW REPLICA STATUS"
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    async def check(self) -> float | None:
        """Read the lag now (None: unknown) and remember it."""
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                statuses = await self._status()
        except Exception as exc:
            if not self._warned:
                log.warning("the read replica's lag cannot be read (%s)", exc.__class__.__name__)
                self._warned = True
            self.record(None)
            return None
        self._warned = False
        self.record(lag_of(statuses))
        return self.seconds

    async def _status(self) -> list[Mapping[str, Any]]:
        async with self.replica.connect() as conn:
            try:
                result = await conn.execute(text(self._statement))
            except DBAPIError:
                if self._statement == "SHOW SLAVE STATUS":
                    raise
                # MariaDB before 10.5 and MySQL before 8.0.22 know only the older name.
                self._statement = "SHOW SLAVE STATUS"
                await conn.rollback()
                result = await conn.execute(text(self._statement))
            return [dict(row) for row in result.mappings().all()]

    def record(self, seconds: float | None) -> None:
        """Remember a reading of the lag (None: unknown) as of now."""
        self.seconds = seconds
        self._checked = time.monotonic()
        LAG.set(math.nan if seconds is None else seconds)
        ON_PRIMARY.set(0 if self.usable() else 1)

    def usable(self, now: float | None = None) -> bool:
        """The replica's lag is known, within the limit, and was read recently enough (a check
        that hangs leaves the last answer to go stale)."""
        now = time.monotonic() if now is None else now
        stale_after = 2 * self.every + CHECK_TIMEOUT_SECONDS
        return (
            self.seconds is not None
            and self.seconds <= self.max_seconds
            and now - self._checked <= stale_after
        )

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="replica-lag")

    async def _run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.every)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class Reads:
    """Picks the engine of one read: ``replica`` by default, ``primary`` after a write or
    while the replica lags (``lag``). ``replica`` may be the primary's own read-only engine
    (``replicated=False``): then every read goes there, as nothing lags."""

    def __init__(
        self,
        primary: AsyncEngine,
        replica: AsyncEngine | None = None,
        *,
        sticky_seconds: float,
        lag: ReplicaLag | None = None,
        replicated: bool | None = None,
    ) -> None:
        self.primary = primary
        self.replica = replica if replica is not None else primary
        # Whether the replica is another server, which may lag behind the primary.
        self.replicated = self.replica is not primary if replicated is None else replicated
        self.sticky_seconds = sticky_seconds
        self.lag = lag if self.replicated else None
        self._until: OrderedDict[tuple[str, str | None], float] = OrderedDict()

    def current(self) -> AsyncEngine:
        """The engine of a read not tied to one user's writes (messages, statistics)."""
        if self.lag is not None and not self.lag.usable():
            return self.primary
        return self.replica

    def wrote(self, tenant_id: str, user_id: str | None = None) -> None:
        """A write for this user (None: someone of this tenant) went to the primary now."""
        if not self.replicated:
            return
        key = (tenant_id, user_id)
        self._until[key] = time.monotonic() + self.sticky_seconds
        self._until.move_to_end(key)
        while len(self._until) > MAX_TRACKED:
            self._until.popitem(last=False)

    def engine(self, tenant_id: str, user_id: str) -> AsyncEngine:
        """The engine that answers a read of this user's data now."""
        if not self.replicated:
            return self.replica
        if self.lag is not None and not self.lag.usable():
            return self.primary
        if not self._until:
            return self.replica
        now = time.monotonic()
        for key in ((tenant_id, user_id), (tenant_id, None)):
            until = self._until.get(key)
            if until is not None:
                if until > now:
                    return self.primary
                del self._until[key]
        return self.replica
