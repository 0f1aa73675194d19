"""The API CPU of one request on this checkout against a baseline checkout, measured side by
side: two ``memstream api`` processes on the same data (the loadcpu users), the same requests
sent to each in turn, one at a time, and each process's CPU time per request. Both meet the
same machine at the same moment, so a change smaller than the drift between two loadcpu runs
still shows. ``BENCH_BASELINE``: the baseline's directory (``git worktree add DIR COMMIT``);
``BENCH_CPU_PATH`` (``search`` or ``context``), ``BENCH_PAIR_REQUESTS`` (1500) each.
``python -m bench cpupair``."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import httpx

from bench.loadpath import bulk
from bench.loadpath.data import load_conversations, query_text
from bench.loadpath.platform import CONVERSATIONS, TENANT, bodies, loadavg, reset_conversations
from bench.loadpath.requests import configure_agents
from bench.loadpath.servers import memstream_api
from bench.support import REPO, isolated_settings
from memstream.settings import Settings

PATH = os.environ.get("BENCH_CPU_PATH", "search")
REQUESTS = int(os.environ.get("BENCH_PAIR_REQUESTS", "1500"))
USERS = 20
WARMUP = 200


def baseline_checkout() -> Path | None:
    """``BENCH_BASELINE`` as an absolute path, when it names a checkout of memstream."""
    named = os.environ.get("BENCH_BASELINE", "")
    path = Path(named).resolve()
    return path if named and (path / "memstream").is_dir() else None


async def main() -> None:
    baseline = baseline_checkout()
    if baseline is None:
        print("cpupair: set BENCH_BASELINE to a checkout to compare with (git worktree add)")
        return
    route = {"search": "/v1/memories/search", "context": "/v1/context"}[PATH]
    url = bulk.bench_url(Settings().database_url)
    await bulk.prepare(url)
    bulk.load(url, TENANT, USERS, progress=False)
    settings = isolated_settings(log_level="WARNING", database_url=url, api_lag_seconds=60.0)
    await reset_conversations(settings)
    await load_conversations(settings, TENANT, CONVERSATIONS, random.Random(1), bulk.user_id)
    print(f"cpupair: {route}, {REQUESTS:,} requests each, load average {loadavg()}")
    logs = Path(tempfile.mkdtemp(prefix="bench-cpupair-"))
    sides = {"baseline": baseline, "this checkout": REPO}
    servers = {
        name: memstream_api(settings, logs / f"{n}.log", name, checkout=checkout)
        for n, (name, checkout) in enumerate(sides.items())
    }
    queries = [query_text(random.Random(q)) for q in range(1_000)]
    requests = bodies(USERS, WARMUP + REQUESTS, 9, queries)
    if PATH == "search":
        keep = ("tenant_id", "user_id", "agent_id", "query")
        requests = [{**{k: b[k] for k in keep}, "top_k": 10} for b in requests]
    spent = dict.fromkeys(servers, 0.0)
    try:
        for server in servers.values():
            server.start()
            await configure_agents(server, TENANT)
        clients = {name: httpx.AsyncClient(base_url=s.base) for name, s in servers.items()}
        for i, body in enumerate(requests):
            for name, server in servers.items():
                before = server.cpu_seconds()
                answer = await clients[name].post(route, json=body)
                answer.raise_for_status()
                if i >= WARMUP:
                    spent[name] += server.cpu_seconds() - before
        for client in clients.values():
            await client.aclose()
    finally:
        for server in servers.values():
            server.stop()
    per = {name: 1000 * seconds / REQUESTS for name, seconds in spent.items()}
    for name, ms in per.items():
        print(f"  {name:14s} {ms:.2f} ms of API CPU a request ({sides[name]})")
    print(f"  this checkout / baseline: {per['this checkout'] / per['baseline']:.3f}x")
    print(f"  server logs: {logs}; load average {loadavg()}")
