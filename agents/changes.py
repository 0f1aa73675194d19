"""The ``memory-changed`` relay of this worker (``memstream.changes.relay``): it publishes the
outbox, whichever process wrote it, while it holds the topic's lease; the workers that do not
stand by to take over. Off with ``MEMSTREAM_CHANGES_RELAY=false``."""

from __future__ import annotations

from functools import cache

from memstream.changes.relay import ChangeRelay
from memstream.streams import services
from memstream.streams.app import app, settings


@cache
def relay() -> ChangeRelay:
    return ChangeRelay(
        services.resources().engine,
        settings,
        services.router().changes,
        interval=settings.changes_relay_interval_seconds,
    )


if settings.changes_relay:

    @app.task  # type: ignore[untyped-decorator]
    async def relay_changes() -> None:
        await relay().run()
