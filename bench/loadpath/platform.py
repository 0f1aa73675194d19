"""The load path at platform scale: many users x 200 long-term memories, every request from a
uniformly random user, two ``memstream api`` processes sharing the offered load.

``BENCH_PLATFORM_USERS`` users' memories and postings in a database of the benchmark's own
(loaded once, reused) and ``CONVERSATIONS`` cached conversations rewritten each run; open
loops round-robin over the two processes: ``RATE`` requests/s from random users and from
``WARM_USERS`` users, a ramp of ``STEP_SECONDS`` steps to the capacity (at most 0.5%
degraded or refused), then twice that capacity against the load path's time limits. Then
each process's RSS and the database's size per memory. ``python -m bench platform``."""

from __future__ import annotations

import gc
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from bench.loadpath import bulk
from bench.loadpath.data import AGENTS, agent_of, load_conversations, query_text
from bench.loadpath.open_loop import OpenLoop, load_client, open_loop, vegeta
from bench.loadpath.requests import configure_agents
from bench.loadpath.servers import Server, memstream_api
from bench.support import isolated_settings
from memstream.settings import Settings
from memstream.store.database import create_engine

TENANT = "platform"
USERS = int(os.environ.get("BENCH_PLATFORM_USERS", "20000"))
WARM_USERS = 20
CONVERSATIONS = 200
RATE = 200
WARMUP_SECONDS = 5
MEASURE_SECONDS = 20
STEP_SECONDS = 10
RAMP = (300, 400, 500, 650, 800, 1000, 1300)
RAMP_DOWN = (150, 100, 70, 50, 35, 25)
PROBES = 200  # requests one at a time: the latency of an unloaded request
HELD_SHARE = 0.005  # degraded or refused, at most, for a rate to count as held
MARGIN_SECONDS = 0.2  # over the load path's time limits, for the p99 at twice the capacity


def request(u: int, query: str) -> dict[str, Any]:
    return {
        "tenant_id": TENANT,
        "user_id": bulk.user_id(u),
        "agent_id": agent_of(u % AGENTS, long_term=True),
        "conversation_id": f"conv-{u % CONVERSATIONS}",
        "query": query,
    }


def bodies(users: int, count: int, seed: int, queries: Sequence[str]) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [request(rng.randrange(users), rng.choice(queries)) for _ in range(count)]


@dataclass
class Shares:
    full: float
    degraded: float
    refused: float  # 503
    timeouts: float
    other: float

    @classmethod
    def of(cls, r: OpenLoop) -> Shares:
        n = max(1, r.offered)
        refused = r.errors.get("HTTP 503", 0)
        timeouts = r.errors.get("timeout", 0)
        other = sum(r.errors.values()) - refused - timeouts
        full = r.answered - refused - other - r.degraded
        return cls(full / n, r.degraded / n, refused / n, timeouts / n, other / n)

    def held(self) -> bool:
        return self.degraded + self.refused + self.timeouts + self.other <= HELD_SHARE

    def describe(self) -> str:
        return (
            f"full {100 * self.full:.1f}%, degraded {100 * self.degraded:.2f}%,"
            f" 503 {100 * self.refused:.2f}%, client timeouts {100 * self.timeouts:.2f}%,"
            f" other errors {100 * self.other:.2f}%"
        )


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def report(name: str, r: OpenLoop, rate: float) -> Shares:
    shares = Shares.of(r)
    print(
        f"  {name}: {rate:g} req/s offered, {r.answered}/{r.offered} answered"
        f"\n    latency ms  p50 {r.percentile(50):7.1f}  p90 {r.percentile(90):7.1f}"
        f"  p99 {r.percentile(99):7.1f}  max {max(r.latencies_ms, default=float('nan')):7.1f}"
        f"\n    {shares.describe()}; degraded parts {dict(r.degraded_parts) or 'none'}"
        + "".join(
            f"\n    error: {count} x {error}"
            for error, count in r.errors.items()
            if error not in ("timeout", "HTTP 503")
        )
        + f"\n    inside the load path (servers' histograms): p50 <= {r.inside_bound_ms(50):g} ms,"
        f" p99 <= {r.inside_bound_ms(99):g} ms"
        f"\n    servers' CPU {r.cpu_ms:.2f} ms/request; client max send lag"
        f" {r.max_send_lag_ms:.1f} ms; load average {loadavg()}"
        + "".join(f"\n    {usage.describe()}" for usage in r.usage)
    )
    return shares


async def one_at_a_time(
    client: httpx.AsyncClient, these: Sequence[dict[str, Any]]
) -> tuple[OpenLoop, list[float]]:
    """Each request sent when the previous one is answered: latency without queueing; and
    the latencies of the full answers alone (a busy machine makes the overload rule shed
    long-term search for a late event loop, and those answers cost less)."""
    out = OpenLoop(
        offered=len(these), answered=0, latencies_ms=[], errors=Counter(), degraded=0,
        degraded_parts=Counter(), with_items=0, max_send_lag_ms=0, cpu_ms=0, usage=[], inside={},
    )  # fmt: skip
    full: list[float] = []
    for payload in these:
        started = time.perf_counter()
        r = await client.post("/v1/context", json=payload)
        latency = 1000 * (time.perf_counter() - started)
        out.latencies_ms.append(latency)
        if r.status_code != 200:
            out.errors[f"HTTP {r.status_code}"] += 1
            continue
        out.answered += 1
        degraded = r.json()["degraded"]
        if degraded:
            out.degraded += 1
            out.degraded_parts.update(degraded)
        else:
            full.append(latency)
    return out, full


def _percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def overload_counts(client: httpx.AsyncClient) -> dict[str, float]:
    """The process's overload actions (``memstream_api_overload_total``) by action and reason."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families((await client.get("/metrics")).text):
        if family.name == "memstream_api_overload":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = f"{sample.labels['action']}/{sample.labels['reason']}"
                    out[key] = out.get(key, 0) + sample.value
    return out


def memory_of(pid: int) -> tuple[int, int]:
    """(RSS, peak RSS) of a process, bytes."""
    found = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


CONVERSATION_TABLES = (
    "conversation_message",
    "conversation_summary",
    "message_term",
    "message_indexed",
)


async def reset_conversations(settings: Settings) -> None:
    """The tenant's conversations of an earlier run go (through the ordinary, replicated
    connection: these rows were written through it)."""
    engine = create_engine(settings.database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            for table in CONVERSATION_TABLES:
                await conn.execute(text(f"DELETE FROM {table} WHERE tenant_id = :t"), {"t": TENANT})
    finally:
        await engine.dispose()


def api_servers(settings: Settings, logs: Path) -> list[Server]:
    return [
        memstream_api(settings, logs / f"memstream-api-{n + 1}.log", f"memstream api {n + 1}")
        for n in range(2)
    ]


async def main() -> None:
    url = bulk.bench_url(Settings().database_url)
    await bulk.prepare(url)
    print(
        f"platform: {USERS:,} users x {bulk.PER_USER} memories in {bulk.DATABASE},"
        f" load average {loadavg()}"
    )
    loaded = bulk.load(url, TENANT, USERS)
    if loaded.added:
        print(
            f"  loaded {loaded.added:,} users: {loaded.memories_added:,} memories,"
            f" {loaded.postings_added:,} postings in {loaded.seconds:.0f} s"
            f" ({loaded.memories_added / loaded.seconds:,.0f} memories/s)"
        )
    users = min(USERS, loaded.users)
    print(f"  dataset: {users:,} users, {users * bulk.PER_USER:,} memories")

    settings = isolated_settings(log_level="WARNING", database_url=url)
    await reset_conversations(settings)
    took = await load_conversations(settings, TENANT, CONVERSATIONS, random.Random(1), bulk.user_id)
    print(
        f"  {CONVERSATIONS} conversations x 200 messages and summaries:"
        f" {took['messages into MySQL and Redis'] + took['conversation summaries']:.1f} s"
    )

    logs = Path(tempfile.mkdtemp(prefix="bench-platform-"))
    apis = api_servers(settings, logs)
    try:
        for server in apis:
            server.start()
        await configure_agents(apis[0], TENANT)
        queries = [query_text(random.Random(q)) for q in range(1_000)]
        gc.collect()
        gc.freeze()  # the client shares this process: no collector pauses mid-schedule
        clients = [load_client(server) for server in apis]
        try:
            generator = vegeta()
            print(f"  load generator: {generator or 'the benchmark process (httpx)'}")

            async def run(users_: int, rate: float, seconds: int, seed: int) -> OpenLoop:
                these = bodies(users_, round(rate * seconds), seed, queries)
                return await open_loop(clients, apis, these, rate, seconds, generator=generator)

            print(f"  {PROBES} requests one at a time (no load but the machine's):")
            for name, n_users in ((f"{users:,} users", users), (f"{WARM_USERS} users", WARM_USERS)):
                one, full = await one_at_a_time(clients[0], bodies(n_users, PROBES, 5, queries))
                print(
                    f"    {name}: p50 {one.percentile(50):.1f} ms, p99 {one.percentile(99):.1f} ms"
                    f" (full answers only: p50 {_percentile(full, 50):.1f},"
                    f" p99 {_percentile(full, 99):.1f}),"
                    f" degraded {one.degraded} {dict(one.degraded_parts) or ''},"
                    f" errors {sum(one.errors.values())}"
                )
            print(f"  open loop over both processes, {MEASURE_SECONDS} s after a warm-up:")
            await run(users, RATE, WARMUP_SECONDS, 1)
            platform = await run(users, RATE, MEASURE_SECONDS, 2)
            report(f"{users:,} users, each request a random one", platform, RATE)
            await run(WARM_USERS, RATE, WARMUP_SECONDS, 3)
            warm = await run(WARM_USERS, RATE, MEASURE_SECONDS, 4)
            report(f"{WARM_USERS} warm users (baseline)", warm, RATE)
            print(
                f"    p99 ratio {users:,} users / {WARM_USERS} users:"
                f" {platform.percentile(99) / warm.percentile(99):.2f}x,"
                f" p50 {platform.percentile(50) / warm.percentile(50):.2f}x"
            )

            # Up from RATE while the answers hold, or down from it until they do.
            held = Shares.of(platform).held()
            steps = RAMP if held else RAMP_DOWN
            print(
                f"  ramp {'up' if held else 'down'} to the capacity ({STEP_SECONDS} s a step,"
                " random users):"
            )
            capacity = RATE if held else steps[-1]
            for step, rate in enumerate(steps):
                r = await run(users, rate, STEP_SECONDS, 10 + step)
                if report(f"step {step + 1}", r, rate).held() != held:
                    if not held:
                        capacity = rate
                    break
                if held:
                    capacity = rate
            print(f"    capacity: {capacity} req/s (both processes)")

            overload = 2 * capacity
            await run(users, overload, WARMUP_SECONDS, 30)
            r = await run(users, overload, MEASURE_SECONDS, 31)
            shares = report(f"twice the capacity ({overload} req/s)", r, overload)
            limit = max(settings.short_term_timeout_seconds, settings.long_term_timeout_seconds)
            bound_ms = 1000 * (limit + settings.api_queue_seconds + MARGIN_SECONDS)
            p99 = r.percentile(99)
            print(
                f"    p99 {p99:.0f} ms against {bound_ms:.0f} ms (time limit"
                f" {limit:g} s + queue {settings.api_queue_seconds:g} s + margin"
                f" {MARGIN_SECONDS:g} s): {'met' if p99 <= bound_ms else 'NOT met'};"
                f" client timeouts {r.errors.get('timeout', 0)}"
                f" ({'none lost' if not shares.timeouts else 'requests lost'})"
            )
            for server, client in zip(apis, clients, strict=True):
                print(f"    {server.name}, overload actions: {await overload_counts(client)}")
        finally:
            for client in clients:
                await client.aclose()

        print("  API processes after the runs:")
        for server in apis:
            rss, peak = memory_of(server.pid)
            print(f"    {server.name}: RSS {rss / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB")
        print(f"  server logs: {logs}")
    finally:
        for server in apis:
            server.stop()

    print("  database (InnoDB data + index, from information_schema after ANALYZE):")
    memories = 0
    for size in bulk.sizes(url):
        total = size.data_bytes + size.index_bytes
        if size.table == "long_term_memory":
            memories = size.rows
        per_memory = total / memories if memories else float("nan")
        per_row = total / size.rows if size.rows else float("nan")
        print(
            f"    {size.table:<17} {size.rows:>11,} rows, data {size.data_bytes / 2**20:8.0f} MiB,"
            f" index {size.index_bytes / 2**20:7.0f} MiB: {per_row:6.0f} B/row,"
            f" {per_memory:6.0f} B/memory"
        )
