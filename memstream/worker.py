"""``memstream worker``: the Faust worker running every stream stage."""

from __future__ import annotations

import asyncio

from memstream.kafka import ensure_topics
from memstream.settings import Settings


def run_worker(settings: Settings) -> int:
    # Topics are created up front with the configured partition count, so every worker of the
    # group agrees on it whoever starts first.
    asyncio.run(ensure_topics(settings))

    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    import agents.history  # noqa: F401 - registers the agent on the app
    from streams.app import app

    @app.page("/metrics")
    async def metrics(self: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        # aiohttp wants the charset apart from the media type.
        return self.text(generate_latest().decode(), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    worker = faust.Worker(app, loglevel=settings.log_level.lower())
    worker.execute_from_commandline()
    return 0
