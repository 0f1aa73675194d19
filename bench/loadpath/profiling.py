"""Where the load path's time goes: the server sampled by ``py-spy`` during the measured
window (``BENCH_PROFILE=FILE``), the frames holding the most samples printed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.loadpath.open_loop import OPEN_SECONDS
from bench.loadpath.servers import Server
from bench.support import REPO, print_top


def profiler(
    server: Server, seconds: int = OPEN_SECONDS, *, gil: bool = False
) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server for the measured window, when ``BENCH_PROFILE`` asks
    (``BENCH_PY_SPY``: the py-spy to run, when it is not on the path nor in this venv); with
    ``gil``, only the samples of a thread holding the GIL: where the CPU goes, not the waits."""
    path = os.environ.get("BENCH_PROFILE")
    spy = (
        os.environ.get("BENCH_PY_SPY")
        or shutil.which("py-spy")
        or str(Path(sys.executable).with_name("py-spy"))
    )
    if not path or not Path(spy).exists():
        return None
    argv = [spy, "record", "--pid", str(server.pid), "--duration", str(seconds)]
    argv += ["--rate", "250", "--format", "raw", "--output", path, "--nonblocking"]
    if gil:
        argv.append("--gil")
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_profile(path: str, top: int = 30) -> None:
    """The functions on the most sampled stacks (inclusive), memstream's and its libraries'."""
    total = 0
    inclusive: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack:
            continue
        total += int(samples)
        names = {frame.split(" (")[0] + " (" + _module(frame) + ")" for frame in stack.split(";")}
        for name in names:
            inclusive[name] += int(samples)
    print(f"    profile of the measured window ({total} samples, inclusive), raw stacks: {path}")
    print_top(inclusive, total, top, _FRAMES_NOT_SHOWN)


# Frames every request passes through whatever it does: the server loop and the runner.
_FRAMES_NOT_SHOWN = (
    "runpy",
    "uvicorn/main",
    "uvicorn/server",
    "uvicorn/_compat",
    "asyncio/runners",
    "__main__",
    "cli/main",
)


def _module(frame: str) -> str:
    where = frame.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]
    return where.split("site-packages/")[-1].split(f"{REPO.name}/")[-1]
