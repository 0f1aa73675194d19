"""``/healthz`` (process up), ``/readyz`` (database, cache and broker reachable; the workers'
consumer group, required with ``?workers=true``, kept for ``MEMSTREAM_API_SNAPSHOT_SECONDS``
so that callers without a key cannot make the API open broker clients in a loop), ``/metrics``."""

from __future__ import annotations

import asyncio
from functools import partial
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memstream import readiness
from memstream.api.services import Services, ServicesDep
from memstream.snapshot import process_snapshot
from memstream.store.database import ping

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, services: ServicesDep, workers: bool = False) -> JSONResponse:
    checks = await _readiness(services)
    settings = services.settings
    compute = partial(readiness.workers, settings)
    found = await process_snapshot(
        request.app.state, "readiness", compute, settings.api_snapshot_seconds
    ).get()
    if workers:
        checks["workers"] = found.check()
    ready = all(v in ("ok", "disabled") for v in checks.values())
    body: dict[str, object] = {"status": "ready" if ready else "not_ready", "checks": checks}
    body |= {"workers": found.as_json(), "read_replica": _replica(services)}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def _replica(services: Services) -> dict[str, object] | None:
    """Where reads go and why: the replica's last known lag (None: unknown) against the
    limit. A lagging replica leaves the API ready: it reads the primary meanwhile."""
    reads = services.reads
    if not reads.replicated:
        return None
    lag = reads.lag
    return {
        "reads": "replica" if reads.current() is reads.replica else "primary",
        "lag_seconds": None if lag is None else lag.seconds,
        "max_lag_seconds": None if lag is None else lag.max_seconds,
    }


async def _readiness(services: Services) -> dict[str, str]:
    """``ok``, ``disabled`` or ``error: <exception class>`` for each service, 2 s each at most."""

    async def database() -> str:
        await ping(services.engine)
        return "ok"

    async def cache() -> str:
        if services.cache is None:
            return "disabled"
        await services.cache.ping()
        return "ok"

    async def broker() -> str:
        host, _, port = services.settings.kafka_bootstrap_servers.split(",")[0].rpartition(":")
        _, writer = await asyncio.open_connection(urlsplit(f"//{host}").hostname, int(port))
        writer.close()
        return "ok"

    checks = {"database": database, "cache": cache, "broker": broker}
    results = {}
    for name, check in checks.items():
        try:
            async with asyncio.timeout(2):
                results[name] = await check()
        except Exception as exc:
            results[name] = f"error: {exc.__class__.__name__}"
    return results
