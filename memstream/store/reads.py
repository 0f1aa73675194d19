"""Where the API's reads go: the read replica (``MEMSTREAM_DATABASE_READ_URL``), except for a
user whose memories this process changed within the last few seconds, read on the primary.

A replica applies the primary's writes a little later (its lag). Without the exception a
client that stores a memory through the API and searches at once could miss it, and one that
deletes or forgets could still find what it removed. With it, the API's own writes are seen
by this process's next reads of that user; writes made elsewhere (the worker, another API
process) reach the reads once the replica has them. A write the ids do not tie to one user
(deleting memories by id) sends the whole tenant's reads to the primary for that time.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from sqlalchemy.ext.asyncio import AsyncEngine

MAX_TRACKED = 100_000
"""Users (and tenants) remembered as recently written; the oldest are dropped first, which
only sends their reads back to the replica early."""


class Reads:
    """Picks the engine of one read: ``replica`` by default, ``primary`` after a write."""

    def __init__(
        self, primary: AsyncEngine, replica: AsyncEngine | None = None, *, sticky_seconds: float
    ) -> None:
        self.primary = primary
        self.replica = replica if replica is not None else primary
        self.sticky_seconds = sticky_seconds
        self._until: OrderedDict[tuple[str, str | None], float] = OrderedDict()

    def wrote(self, tenant_id: str, user_id: str | None = None) -> None:
        """A write for this user (None: someone of this tenant) went to the primary now."""
        if self.replica is self.primary:
            return
        key = (tenant_id, user_id)
        self._until[key] = time.monotonic() + self.sticky_seconds
        self._until.move_to_end(key)
        while len(self._until) > MAX_TRACKED:
            self._until.popitem(last=False)

    def engine(self, tenant_id: str, user_id: str) -> AsyncEngine:
        """The engine that answers a read of this user's data now."""
        if self.replica is self.primary or not self._until:
            return self.replica
        now = time.monotonic()
        for key in ((tenant_id, user_id), (tenant_id, None)):
            until = self._until.get(key)
            if until is not None:
                if until > now:
                    return self.primary
                del self._until[key]
        return self.replica
