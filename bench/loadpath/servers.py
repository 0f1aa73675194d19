"""The servers under the load path benchmark (memstream's API and the reference design's) and
their CPU use."""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from bench.support import REPO
from memstream.launch import Launched, memstream_argv, settings_env
from memstream.settings import Settings
from tests.support.settings import free_port


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_path: Path
    process: Launched | None = None
    # The checkout it runs from: ``python -m memstream`` imports that checkout's memstream.
    cwd: Path = REPO

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, within: float = 60) -> None:
        """Start the server and return once its ``/healthz`` answers."""
        self.process = Launched.start(
            self.argv,
            env=self.env,
            ready_url=f"{self.base}/healthz",
            timeout=within,
            log_path=self.log_path,
            cwd=self.cwd,
            name=self.name,
        )

    def cpu_seconds(self) -> float:
        """utime + stime of the server process (all its threads) so far."""
        return sum(process_times(self.pid))

    def runqueue_seconds(self) -> float:
        """How long the server's main thread (the event loop) has waited for a CPU while
        runnable (``/proc/PID/schedstat``)."""
        with open(f"/proc/{self.pid}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def process_times(pid: int) -> tuple[float, float]:
    """utime and stime of process ``pid`` (all its threads) so far, in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    # After the command name: state is field 3, utime and stime are fields 14 and 15.
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def listening_pid(url: str) -> int | None:
    """The process of this machine listening on ``url``'s port (a database or Redis the
    benchmark talks to), or None when it is elsewhere or not ours to read."""
    port = make_url(url).port
    if port is None:
        return None
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                local, state, inode = (line.split()[i] for i in (1, 3, 9))
                if state == "0A" and int(local.rpartition(":")[2], 16) == port:  # LISTEN
                    inodes.add(f"socket:[{inode}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                return int(pid)
        except OSError:
            continue
    return None


def memstream_api(
    settings: Settings, log_path: Path, name: str = "memstream api", checkout: Path = REPO
) -> Server:
    """``memstream api`` on ``settings``, on a free port of its own, run from ``checkout``."""
    port = free_port()
    return Server(
        name,
        memstream_argv("api"),
        settings_env(settings.model_copy(update={"api_port": port})),
        port,
        log_path,
        cwd=checkout,
    )


def servers(settings: Settings, log_dir: Path) -> tuple[Server, Server]:
    memstream = memstream_api(settings, log_dir / "memstream-api.log")
    port = free_port()
    reference = Server(
        "reference api",
        [sys.executable, "-m", "bench.reference_api"],
        {**settings_env(settings), "BENCH_REFERENCE_PORT": str(port)},
        port,
        log_dir / "reference-api.log",
    )
    return memstream, reference


@dataclass(frozen=True)
class Usage:
    """CPU seconds so far: the server process's, this process's and its waited children's
    (the load generator), and the whole machine's busy and total."""

    server: float
    waited: float
    client: float
    busy: float
    total: float

    @classmethod
    def now(cls, server: Server) -> Usage:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:9]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = ticks[3] + ticks[4]  # idle and iowait
        mine = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime
        return cls(
            server.cpu_seconds(),
            server.runqueue_seconds(),
            client,
            (sum(ticks) - idle) / tick,
            sum(ticks) / tick,
        )

    def since(self, before: Usage) -> Window:
        wall = (self.total - before.total) / (os.cpu_count() or 1)
        server = self.server - before.server
        client = self.client - before.client
        return Window(
            server_seconds=server,
            server_cores=server / wall,
            server_waiting=(self.waited - before.waited) / wall,
            client_cores=client / wall,
            rest_cores=(self.busy - before.busy - server - client) / wall,
        )


@dataclass(frozen=True)
class Window:
    """CPU use over a measured window: the server's seconds, and the average busy cores of
    the server, the load generator, and the rest of the machine (MariaDB, Redis, Kafka and
    anything else running)."""

    server_seconds: float
    server_cores: float
    server_waiting: float  # share of the window the event loop was runnable but not running
    client_cores: float
    rest_cores: float

    def describe(self) -> str:
        return (
            f"cores busy: server {self.server_cores:.2f}, load generator"
            f" {self.client_cores:.2f}, rest {self.rest_cores:.2f} (of {os.cpu_count()});"
            f" the server waited for a core {1000 * self.server_waiting:.0f} ms per second"
        )
