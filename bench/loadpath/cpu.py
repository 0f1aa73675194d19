"""What one cold-user request of the load path costs one API process in CPU: ``memstream api`` on
the platform dataset, requests from uniformly random users in an open loop well under
capacity (vegeta when there is one), and the process's utime + stime per answered request,
beside the database's and Redis's. The late-loop rule is off: every answer is a full one.
``BENCH_CPU_RATE`` (20/s), ``BENCH_CPU_SECONDS`` (30), ``BENCH_PROFILE=FILE`` (py-spy, the
samples holding the GIL), ``BENCH_CPU_PATH=search`` (``POST /v1/memories/search`` instead of
``/v1/context``), ``BENCH_CPU_USERS`` (the first that many users), ``BENCH_CPU_TRACING``
(``off``, ``on``: spans exported over OTLP/HTTP, ``both``: ``BENCH_CPU_PAIRS`` runs of each).
``python -m bench loadcpu``; ``bench cpupair`` compares two checkouts side by side."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.loadpath import bulk
from bench.loadpath.data import load_conversations, query_text
from bench.loadpath.open_loop import load_client, open_loop, vegeta
from bench.loadpath.otlp_sink import OtlpSink
from bench.loadpath.platform import CONVERSATIONS, TENANT, bodies, loadavg, reset_conversations
from bench.loadpath.profiling import print_profile, profiler
from bench.loadpath.requests import configure_agents
from bench.loadpath.servers import Server, listening_pid, memstream_api, process_times
from bench.support import isolated_settings
from memstream.settings import Settings

RATE = float(os.environ.get("BENCH_CPU_RATE", "20"))
SECONDS = int(os.environ.get("BENCH_CPU_SECONDS", "30"))
PATH = os.environ.get("BENCH_CPU_PATH", "context")
USERS = int(os.environ.get("BENCH_CPU_USERS", "0"))  # 0: every user loaded
WARMUP_SECONDS = 5
IDLE_SECONDS = 5
TRACING = os.environ.get("BENCH_CPU_TRACING", "off")
PAIRS = int(os.environ.get("BENCH_CPU_PAIRS", "2"))


async def main() -> None:
    url = bulk.bench_url(Settings().database_url)
    await bulk.prepare(url)
    if PATH not in ("context", "search"):
        raise SystemExit(f"BENCH_CPU_PATH must be context or search, not {PATH!r}")
    loaded = bulk.load(url, TENANT, max(1, USERS), progress=False).users  # adds only missing
    users = min(loaded, USERS) if USERS else loaded
    route = "/v1/context" if PATH == "context" else "/v1/memories/search"
    print(
        f"loadcpu: {route}, random users of {users:,} (of {loaded:,}) in {bulk.DATABASE},"
        f" load average {loadavg()}"
    )

    queries = [query_text(random.Random(q)) for q in range(1_000)]

    def requests(count: int, seed: int) -> list[dict[str, Any]]:
        found = bodies(users, count, seed, queries)
        if PATH == "search":
            keep = ("tenant_id", "user_id", "agent_id", "query")
            return [{**{k: b[k] for k in keep}, "top_k": 10} for b in found]
        return found

    # The late-loop rule off: on a shared machine it would answer short-term only, a cheaper
    # request than the one measured here.
    settings = isolated_settings(log_level="WARNING", database_url=url, api_lag_seconds=60.0)
    await reset_conversations(settings)
    await load_conversations(settings, TENANT, CONVERSATIONS, random.Random(1), bulk.user_id)
    modes = {"off": [False], "on": [True], "both": [False, True] * PAIRS}[TRACING]
    logs = Path(tempfile.mkdtemp(prefix="bench-loadcpu-"))
    measured: dict[bool, list[float]] = {False: [], True: []}
    with OtlpSink() as sink:
        for n, traced in enumerate(modes):
            print(f"  tracing {'on, OTLP/HTTP to ' + sink.url if traced else 'off'}")
            environ = sink.environ() if traced else {}
            os.environ.update(environ)
            try:
                server = memstream_api(settings, logs / f"memstream-api-{n}.log")
            finally:
                for name in environ:
                    del os.environ[name]
            measured[traced].append(await measure(server, settings, requests, route))
            if traced:
                print(f"    the receiver has {sink.spans:,} spans in {sink.requests:,} exports")
    if measured[False] and measured[True]:
        off, on = measured[False], measured[True]
        print(
            f"  tracing off {', '.join(f'{v:.2f}' for v in off)} ms/request,"
            f" on {', '.join(f'{v:.2f}' for v in on)} ms/request:"
            f" on - off {statistics.mean(on) - statistics.mean(off):+.2f} ms/request"
            f" ({statistics.mean(on) / statistics.mean(off):.3f}x)"
        )


async def measure(
    server: Server,
    settings: Settings,
    requests: Callable[[int, int], list[dict[str, Any]]],
    route: str,
) -> float:
    """One API process measured; answers its CPU per answered request (ms)."""
    server.start()
    try:
        await configure_agents(server, TENANT)
        gc.collect()
        gc.freeze()
        client = load_client(server)
        try:
            await open_loop([client], [server], requests(200, 7), 50, 4, path=route)
            await open_loop([client], [server], requests(400, 8), RATE, WARMUP_SECONDS, path=route)
            # What the process spends with no request (its loop watch, flushers), per second.
            idle_from = server.cpu_seconds()
            await asyncio.sleep(IDLE_SECONDS)
            idle = (server.cpu_seconds() - idle_from) / IDLE_SECONDS
            peers = {
                "database": listening_pid(settings.database_url),
                "Redis": listening_pid(str(settings.redis_url)),
            }
            these = requests(round(RATE * SECONDS), 9)
            before = {name: (pid, sum(process_times(pid))) for name, pid in peers.items() if pid}
            server_before = process_times(server.pid)
            spy = profiler(server, SECONDS, gil=True)
            generator = vegeta()
            r = await open_loop(
                [client], [server], these, RATE, SECONDS, generator=generator, path=route
            )
            if spy is not None:
                spy.wait()
            user, system = (
                1000 * (after - was) / max(1, r.answered)
                for after, was in zip(process_times(server.pid), server_before, strict=True)
            )
            elsewhere = {
                name: 1000 * (sum(process_times(pid)) - was) for name, (pid, was) in before.items()
            }
        finally:
            await client.aclose()
        full = r.answered - r.degraded - sum(r.errors.values())
        print(
            f"  {RATE:g} req/s for {SECONDS} s: {r.answered}/{r.offered} answered, {full} full,"
            f" degraded {dict(r.degraded_parts) or 'none'}, errors {dict(r.errors) or 'none'},"
            f" {r.with_items} with long-term items"
            f"\n    server CPU {r.cpu_ms:.2f} ms/request (utime {user:.2f} + stime {system:.2f}"
            f" of the process; {1000 * idle:.1f} ms/s when idle,"
            f" {1000 * idle / RATE:.2f} ms/request of it);"
            + "".join(
                f" {name} {ms / max(1, r.answered):.2f} ms/request;"
                for name, ms in elsewhere.items()
            )
            + f"\n    load generator: {generator or 'this process (httpx)'};"
            f" latency p50 {r.percentile(50):.1f} ms, p99 {r.percentile(99):.1f} ms;"
            f" load average {loadavg()}\n    {r.usage[0].describe()}"
        )
        if spy is not None:
            print_profile(os.environ["BENCH_PROFILE"])
        print(f"  server log: {server.log_path}")
    finally:
        server.stop()
    return r.cpu_ms
