"""``memstream worker``: the Faust worker running every stream stage."""

from __future__ import annotations

import asyncio

from memstream.kafka import PUBLIC_TOPICS, ensure_topics, internal_topics
from memstream.metrics import update_consumer_lag
from memstream.settings import Settings

LAG_INTERVAL_SECONDS = 10.0


def run_worker(settings: Settings) -> int:
    # Topics are created up front with the configured partition count, so every worker of the
    # group agrees on it whoever starts first.
    asyncio.run(ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings)))

    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    # Importing the agent modules registers them on the app.
    import memstream.agents.conflict
    import memstream.agents.dedupe
    import memstream.agents.embed
    import memstream.agents.history
    import memstream.agents.judge
    import memstream.agents.persist
    import memstream.agents.retry
    import memstream.agents.session
    import memstream.agents.summary  # noqa: F401
    from memstream.streams.app import app

    @app.page("/metrics")
    async def metrics(self: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        # aiohttp wants the charset apart from the media type.
        return self.text(generate_latest().decode(), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.timer(interval=LAG_INTERVAL_SECONDS)  # type: ignore[untyped-decorator]
    async def consumer_lag() -> None:
        update_consumer_lag(app.consumer)

    worker = faust.Worker(app, loglevel=settings.log_level.lower())
    worker.execute_from_commandline()
    return 0
