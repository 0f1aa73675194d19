"""Benchmark 1 of the load path: saturation throughput under ``wrk``."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.loadpath.servers import Server, Usage, Window

WRK_THREADS = 2
WRK_CONNECTIONS = 64
WRK_WARMUP_SECONDS = 3
WRK_SECONDS = 15


WRK_SCRIPT = """
local bodies = {
%(bodies)s
}
local headers = { ["Content-Type"] = "application/json" }
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("seed", threads)
end

function init(args)
  math.randomseed(os.time() * 1000 + seed * 7919)
end

function request()
  return wrk.format("POST", "/v1/context", headers, bodies[math.random(#bodies)])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests": %%d, "duration_us": %%d, "bytes": %%d, "connect": %%d, '
    .. '"read": %%d, "write": %%d, "status": %%d, "timeout": %%d, "p50_us": %%d, '
    .. '"p99_us": %%d, "max_us": %%d}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def wrk_script(path: Path, bodies: Sequence[dict[str, Any]]) -> None:
    """A wrk script POSTing one of ``bodies`` (one per conversation) at random per request."""
    lines = ",\n".join(f"  [==[{orjson.dumps(b).decode()}]==]" for b in bodies)
    path.write_text(WRK_SCRIPT % {"bodies": lines})


@dataclass
class Saturation:
    rate: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # server CPU per request
    usage: Window


async def wrk(server: Server, script: Path, seconds: int) -> dict[str, int]:
    wrk_bin = shutil.which("wrk")
    if wrk_bin is None:
        raise RuntimeError("wrk is not installed: apt-get install -y wrk")
    proc = await asyncio.create_subprocess_exec(
        wrk_bin,
        f"-t{WRK_THREADS}",
        f"-c{WRK_CONNECTIONS}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        server.base,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("WRK_RESULT "):
            result: dict[str, int] = orjson.loads(line.removeprefix("WRK_RESULT "))
            return result
    raise RuntimeError(f"wrk gave no result:\n{text}")


async def saturate(server: Server, script: Path) -> Saturation:
    await wrk(server, script, WRK_WARMUP_SECONDS)
    before = Usage.now(server)
    r = await wrk(server, script, WRK_SECONDS)
    usage = Usage.now(server).since(before)
    if not server.alive():
        raise RuntimeError(f"{server.name} died; see {server.log_path}")
    errors = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
    return Saturation(
        rate=r["requests"] / (r["duration_us"] / 1e6),
        requests=r["requests"],
        errors=errors,
        p50_ms=r["p50_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        cpu_ms=1000 * usage.server_seconds / max(1, r["requests"]),
        usage=usage,
    )
