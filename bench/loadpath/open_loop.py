"""Benchmark 2 of the load path: latency at a fixed offered rate, open loop (requests leave on
schedule whatever the responses do; latency counts from the scheduled send time)."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.loadpath.requests import TIMEOUT_SECONDS
from bench.loadpath.servers import Server, Usage, Window

RATE = 200  # requests/s offered in the open-loop benchmark
OPEN_WARMUP_SECONDS = 5
OPEN_SECONDS = 20
KEEPALIVE = 32  # idle connections the open-loop client keeps (see load_client)


@dataclass
class OpenLoop:
    offered: int
    answered: int
    latencies_ms: list[float]
    errors: Counter[str]
    degraded: int
    degraded_parts: Counter[str]
    with_items: int
    max_send_lag_ms: float
    cpu_ms: float  # the servers' CPU per answered request
    usage: list[Window]  # one per server
    inside: dict[float, float]  # memstream_load_path_seconds{path="total"} buckets, by le

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    def over_ms(self, bound_ms: float) -> float:
        """The share of requests slower than ``bound_ms`` (from their scheduled send time)."""
        slow = sum(1 for latency in self.latencies_ms if latency > bound_ms)
        return slow / len(self.latencies_ms) if self.latencies_ms else float("nan")

    def inside_bound_ms(self, p: float) -> float:
        """The upper bound of the histogram bucket holding the p-th percentile of the time
        spent inside the load path (``LoadPath.context``), as the server measured it."""
        count = self.inside.get(float("inf"), 0.0)
        for le, cumulative in sorted(self.inside.items()):
            if count and cumulative >= p / 100 * count:
                return 1000 * le
        return float("nan")

    def inside_over_ms(self, bound_ms: float) -> float:
        """The share of requests that spent more than ``bound_ms`` inside the load path."""
        count = self.inside.get(float("inf"), 0.0)
        within = self.inside.get(bound_ms / 1000, float("nan"))
        return (count - within) / count if count else float("nan")


async def load_histogram(client: httpx.AsyncClient) -> dict[float, float]:
    """memstream's own load-path latency histogram (path ``total``), cumulative by bucket."""
    text = (await client.get("/metrics")).text
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "memstream_load_path_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.labels.get("path") == "total":
                    out[float(sample.labels["le"])] = sample.value
    return out


def load_client(server: Server) -> httpx.AsyncClient:
    """The open-loop generator's one client: no request ever waits for a connection.

    Idle keep-alive connections are capped, though: httpcore 1.0's pool does work quadratic
    in its number of connections for every idle one on every request, so after a stall of
    the server had opened a hundred connections the client itself would fall behind (and
    then open more). The send lag and load-generator CPU printed with each result show
    whether the client kept its schedule."""
    return httpx.AsyncClient(
        base_url=server.base,
        limits=httpx.Limits(max_connections=4096, max_keepalive_connections=KEEPALIVE),
        timeout=httpx.Timeout(TIMEOUT_SECONDS),
    )


async def _histograms(clients: Sequence[httpx.AsyncClient]) -> dict[float, float]:
    out: dict[float, float] = {}
    for client in clients:
        for le, n in (await load_histogram(client)).items():
            out[le] = out.get(le, 0.0) + n
    return out


def vegeta() -> str | None:
    """The vegeta binary to generate the load with (``BENCH_VEGETA``, else on ``PATH``), or
    None: the benchmark's own client then sends it."""
    return os.environ.get("BENCH_VEGETA") or shutil.which("vegeta")


async def open_loop(
    clients: Sequence[httpx.AsyncClient],
    servers: Sequence[Server],
    bodies: Sequence[dict[str, Any]],
    rate: float,
    seconds: int,
    *,
    generator: str | None = None,
    path: str = "/v1/context",
    headers: dict[str, str] | None = None,
) -> OpenLoop:
    """Send ``rate`` requests/s for ``seconds`` on a fixed schedule, whatever the answers do;
    each latency counts from the request's scheduled send time (queueing is not hidden).
    Request i goes to the server ``i % len(servers)`` (a round-robin load balancer).

    The requests leave from ``clients`` (one per server, this process), or with
    ``generator`` from that vegeta binary (Go, a constant-rate open loop): a few hundredths
    of a core at 200 requests/s where this process's client takes more than half of one, on
    the same cores as the servers. vegeta counts a latency from the moment its pacer
    released the request; it starts a new worker rather than hold one back, so that is the
    scheduled time unless the generator itself is starved. ``path`` is the route posted to
    (``/v1/context``, or ``/v1/memories/search``, whose answers hold only ``items``)."""
    count = round(rate * seconds)
    payloads = [orjson.dumps(bodies[i % len(bodies)]) for i in range(count)]
    histogram = await _histograms(clients)
    before = [Usage.now(server) for server in servers]
    r = OpenLoop(count, 0, [], Counter(), 0, Counter(), 0, 0.0, 0.0, [], {})
    sent = {"content-type": "application/json", **(headers or {})}
    if generator is None:
        await _send_from_here(r, clients, payloads, rate, path, sent)
    else:
        bases = [f"{s.base}{path}" for s in servers]
        await _send_with_vegeta(r, generator, bases, payloads, rate, seconds, sent)
    r.usage = [Usage.now(server).since(b) for server, b in zip(servers, before, strict=True)]
    r.inside = {le: n - histogram.get(le, 0.0) for le, n in (await _histograms(clients)).items()}
    r.cpu_ms = 1000 * sum(u.server_seconds for u in r.usage) / max(1, r.answered)
    return r


def _answered(r: OpenLoop, latency_ms: float, status: int, body: bytes) -> None:
    """Count one answer into ``r``: its latency, its status, and a 200's degraded parts."""
    r.latencies_ms.append(latency_ms)
    r.answered += 1
    if status != 200:
        r.errors[f"HTTP {status}"] += 1
        return
    answer = orjson.loads(body)
    if "items" in answer:  # a search's answer
        r.with_items += bool(answer["items"])
        return
    if answer["degraded"]:
        r.degraded += 1
        r.degraded_parts.update(answer["degraded"])
    if answer["long_term"]["items"]:
        r.with_items += 1


def _failed(r: OpenLoop, latency_ms: float, error: str) -> None:
    """A request without an answer counts in the percentiles too, at the time it took to fail."""
    r.latencies_ms.append(latency_ms)
    r.errors[error] += 1


async def _send_from_here(
    r: OpenLoop,
    clients: Sequence[httpx.AsyncClient],
    payloads: Sequence[bytes],
    rate: float,
    path: str,
    headers: dict[str, str],
) -> None:
    loop = asyncio.get_running_loop()

    async def send(client: httpx.AsyncClient, payload: bytes, at: float) -> None:
        try:
            answer = await client.post(path, content=payload, headers=headers)
        except httpx.HTTPError as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            _failed(r, 1000 * (loop.time() - at), "timeout" if timeout else repr(exc))
            return
        _answered(r, 1000 * (loop.time() - at), answer.status_code, answer.content)

    tasks = []
    lag = 0.0
    first = loop.time() + 0.05
    for i, payload in enumerate(payloads):
        at = first + i / rate
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = max(lag, -delay)
        tasks.append(asyncio.create_task(send(clients[i % len(clients)], payload, at)))
    await asyncio.gather(*tasks)
    r.max_send_lag_ms = 1000 * lag


async def _send_with_vegeta(
    r: OpenLoop, binary: str, bases: Sequence[str], payloads: Sequence[bytes], rate: float,
    seconds: int, headers: dict[str, str],
) -> None:  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="bench-vegeta-"))
    targets, results = folder / "targets.jsonl", folder / "results.bin"
    try:
        with targets.open("wb") as fh:
            for i, payload in enumerate(payloads):
                target = {
                    "method": "POST",
                    "url": bases[i % len(bases)],
                    "body": base64.b64encode(payload).decode(),
                    "header": {name: [value] for name, value in headers.items()},
                }
                fh.write(orjson.dumps(target) + b"\n")
        attack = await asyncio.create_subprocess_exec(
            binary, "attack", "-format=json", f"-targets={targets}", f"-rate={rate:g}/1s",
            f"-duration={seconds}s", f"-timeout={TIMEOUT_SECONDS:g}s", "-workers=32",
            f"-output={results}",
        )  # fmt: skip
        if await attack.wait() != 0:
            raise RuntimeError(f"vegeta attack exited with {attack.returncode}")
        encode = await asyncio.create_subprocess_exec(
            binary, "encode", "-to=json", str(results), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await encode.communicate()
    finally:
        shutil.rmtree(folder)
    for line in out.splitlines():
        result = orjson.loads(line)
        latency_ms = result["latency"] / 1e6
        if result["code"] == 0:  # no answer
            error = result["error"]
            timeout = "Timeout" in error or "deadline" in error
            _failed(r, latency_ms, "timeout" if timeout else error)
        else:
            _answered(r, latency_ms, result["code"], base64.b64decode(result["body"] or ""))
