"""One API process past its capacity, and a quiet tenant beside a loud one.

The platform dataset's users in two tenants, one ``memstream api`` with a key per tenant,
full ``POST /v1/context`` requests of random users in open loops (vegeta when there is one):
the capacity (a ramp of ``STEP_SECONDS`` steps; ``BENCH_ADMISSION_CAPACITY`` skips it), the
quiet tenant at ``QUIET_RATE`` alone and beside the loud one at 3x, then the loud one alone
at 1x, 2x and 4x: shares of full, short-term only, 429, 503 and no answer, and the answers
later than ``BOUND_MS``. ``BENCH_ADMISSION_RATE`` limits the loud tenant's rate,
``BENCH_ADMISSION_PROCESSES`` spreads the requests over that many processes.
``python -m bench admission``."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.loadpath import bulk
from bench.loadpath.data import load_conversations, query_text
from bench.loadpath.open_loop import OpenLoop, load_client, open_loop, vegeta
from bench.loadpath.platform import CONVERSATIONS, TENANT, bodies, loadavg, reset_conversations
from bench.loadpath.requests import configure_agents
from bench.loadpath.servers import memstream_api
from bench.support import isolated_settings
from memstream.settings import Settings

QUIET = f"{TENANT}-quiet"
USERS = 20
QUIET_RATE = 20
SECONDS = int(os.environ.get("BENCH_ADMISSION_SECONDS", "10"))
PROCESSES = int(os.environ.get("BENCH_ADMISSION_PROCESSES", "1"))  # API processes, requests spread
STEP_SECONDS = 5
RAMP = (20, 30, 40, 60, 80, 100, 130, 160, 200, 250, 320, 400, 500)
HELD_SHARE = 0.005
BOUND_MS = 1100.0
KEYS = {TENANT: "bench-loud-key", QUIET: "bench-quiet-key"}


def _as(tenant: str, these: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**b, "tenant_id": tenant} for b in these]


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[tenant]}"}


def shares(r: OpenLoop) -> dict[str, float]:
    n = max(1, r.offered)
    refused = {code: r.errors.get(f"HTTP {code}", 0) for code in (429, 503)}
    lost = sum(r.errors.values()) - sum(refused.values())
    full = r.answered - r.degraded - sum(r.errors.values())
    return {
        "full": full / n,
        "short-term only": r.degraded / n,
        "429": refused[429] / n,
        "503": refused[503] / n,
        "no answer": lost / n,
    }


def describe(name: str, r: OpenLoop, rate: float) -> str:
    late = sum(1 for ms in r.latencies_ms if ms > BOUND_MS)
    parts = ", ".join(f"{k} {100 * v:.1f}%" for k, v in shares(r).items())
    others = {k: v for k, v in r.errors.items() if k not in ("HTTP 429", "HTTP 503")}
    return (
        f"  {name}: {rate:g} req/s offered, {r.answered}/{r.offered} answered"
        f"\n    latency ms  p50 {r.percentile(50):7.1f}  p99 {r.percentile(99):7.1f}"
        f"  max {max(r.latencies_ms, default=float('nan')):7.1f};"
        f" later than {BOUND_MS:g} ms: {late}"
        f"\n    {parts}{'; other: ' + str(others) if others else ''}"
    )


async def main() -> None:
    url = bulk.bench_url(Settings().database_url)
    await bulk.prepare(url)
    for tenant in (TENANT, QUIET):
        bulk.load(url, tenant, USERS, progress=False)
    keys = ",".join(f"{key}:{tenant}" for tenant, key in KEYS.items())
    overrides: dict[str, Any] = {}
    rate = os.environ.get("BENCH_ADMISSION_RATE", "")
    if rate:
        overrides["api_tenant_rate_overrides"] = f"{TENANT}={rate}"
    settings = isolated_settings(log_level="WARNING", database_url=url, api_keys=keys, **overrides)
    await reset_conversations(settings)
    for tenant in (TENANT, QUIET):
        await load_conversations(settings, tenant, CONVERSATIONS, random.Random(1), bulk.user_id)
    logs = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    servers = [memstream_api(settings, logs / f"memstream-api-{n}.log") for n in range(PROCESSES)]
    for server in servers:
        server.start()
    generator = vegeta()
    print(
        f"admission: {PROCESSES} process(es), {USERS} users x 200 memories in each of two tenants,"
        f" load generator {generator or 'this process (httpx)'}, load average {loadavg()}"
        + (f", loud tenant limited to {rate} req/s" if rate else "")
    )
    try:
        for tenant in (TENANT, QUIET):
            await configure_agents(servers[0], tenant, _auth(tenant))
        queries = [query_text(random.Random(q)) for q in range(1_000)]
        gc.collect()
        gc.freeze()
        clients = [load_client(server) for server in servers]
        seed = iter(range(100, 10_000))

        async def run(tenant: str, rate: float, seconds: int) -> OpenLoop:
            these = _as(tenant, bodies(USERS, round(rate * seconds), next(seed), queries))
            return await open_loop(
                clients, servers, these, rate, seconds, generator=generator,
                headers=_auth(tenant),
            )  # fmt: skip

        try:
            await run(QUIET, 50, 4)  # warm-up: connections, caches
            capacity = float(os.environ.get("BENCH_ADMISSION_CAPACITY", "0"))
            if not capacity:
                print("  capacity ramp, loud tenant alone:")
                for step in RAMP:
                    r = await run(TENANT, step, STEP_SECONDS)
                    print(describe(f"ramp {step}", r, step))
                    if shares(r)["full"] < 1 - HELD_SHARE:
                        break
                    capacity = step
                capacity = capacity or RAMP[0] / 2  # not even the first step held
            print(f"  capacity: {capacity:g} req/s (full answers, at most 0.5% otherwise)")
            alone = await run(QUIET, QUIET_RATE, SECONDS)
            print(describe("quiet tenant alone", alone, QUIET_RATE))
            loud_rate = 3 * capacity
            quiet, loud = await asyncio.gather(
                run(QUIET, QUIET_RATE, SECONDS), run(TENANT, loud_rate, SECONDS)
            )
            print(describe("quiet tenant beside the loud one", quiet, QUIET_RATE))
            print(describe("loud tenant at 3x capacity", loud, loud_rate))
            print(
                f"  quiet tenant p99 beside / alone:"
                f" {quiet.percentile(99) / alone.percentile(99):.1f}x"
                f" ({quiet.percentile(99):.1f} / {alone.percentile(99):.1f} ms)"
            )
            for factor in (1, 2, 4):
                await asyncio.sleep(2)  # the loop's lag of the run before forgotten
                r = await run(TENANT, factor * capacity, SECONDS)
                print(describe(f"{factor}x capacity", r, factor * capacity))
        finally:
            for client in clients:
                await client.aclose()
        print(f"  server logs: {logs}; load average {loadavg()}")
    finally:
        for server in servers:
            server.stop()
