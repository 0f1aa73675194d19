"""The worker's web port, as deployed: its metrics and none of Faust's own views."""

from __future__ import annotations

import httpx
import pytest

from memstream.settings import Settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# Faust's built-in views: tables' contents, partition routing, the app's graph, statistics.
FAUST_VIEWS = ["/table/", "/router/", "/graph/", "/stats/", "/performance/"]


async def test_the_worker_port_serves_metrics_only(settings: Settings, start_worker) -> None:  # type: ignore[no-untyped-def]
    worker = start_worker(settings)
    base = f"http://127.0.0.1:{settings.worker_web_port}"
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:

        async def serving() -> bool:
            assert worker.alive(), worker.log()[-3000:]
            try:
                return (await client.get("/metrics")).status_code == 200
            except httpx.HTTPError:
                return False

        await eventually(serving, within=90, what="the worker's /metrics")
        found = {path: (await client.get(path)).status_code for path in FAUST_VIEWS}
    assert found == dict.fromkeys(FAUST_VIEWS, 404)
