"""Redis servers of a test's own (Debian's redis-server, as ``make services`` installs): a small
cluster or a single server, for tests that kill, stop or pause one and must not harm the shared
servers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.settings import free_port

HOST = "127.0.0.1"


@dataclass
class Node:
    port: int
    process: subprocess.Popen[bytes]
    argv: list[str] = field(default_factory=list)
    log_path: Path | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"redis://{self.address}/0"

    def kill(self) -> None:
        """SIGKILL: the server is gone at once, as a crashed machine would be."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: connections are accepted (by the kernel) and never answered."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Start the killed server again on its port (a cluster node with its nodes.conf)."""
        assert self.process.poll() is not None, "the server still runs"
        self.process = _spawn(self.argv, self.log_path)
        _wait(f"{self.address} answering", lambda: _cli("-p", str(self.port), "ping"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.kill()
            self.process.wait(timeout=10)


def _spawn(argv: list[str], log_path: Path | None) -> subprocess.Popen[bytes]:
    log = log_path.open("ab") if log_path is not None else subprocess.DEVNULL
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def start_redis(directory: Path) -> Node:
    """One standalone server on a free port, with no persistence."""
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    argv = ["redis-server", "--bind", HOST, "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", str(directory)]  # fmt: skip
    node = Node(port, _spawn(argv, directory / "redis.log"), argv, directory / "redis.log")
    try:
        _wait(f"{node.address} answering", lambda: _cli("-p", str(port), "ping"))
    except BaseException:
        node.stop()
        raise
    return node


@dataclass
class Cluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://{self.nodes[0].address}/0"

    def node_at(self, port: int) -> Node:
        return next(node for node in self.nodes if node.port == port)

    def marked_failed(self, node: Node) -> bool:
        """Every other node has marked ``node`` as failed (not only suspected it)."""
        for other in self.nodes:
            if other is node:
                continue
            lines = _cli("-p", str(other.port), "cluster", "nodes").splitlines()
            line = next(row for row in lines if f"{node.address}@" in row)
            if "fail" not in line.split()[2].split(","):
                return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _cli(*args: str, timeout: float = 30) -> str:
    done = subprocess.run(
        ["redis-cli", *args], capture_output=True, text=True, timeout=timeout, check=True
    )
    return done.stdout


def _wait(what: str, check: object, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            if callable(check) and check():
                return
        except subprocess.SubprocessError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis Cluster: {what} within {within}s")
        time.sleep(0.1)


def start_cluster(directory: Path, masters: int = 3) -> Cluster:
    """Start ``masters`` empty nodes under ``directory`` and join them into one cluster with
    no replicas; the nodes keep serving their slots while another master is down."""
    cluster = Cluster()
    try:
        for n in range(masters):
            port, bus_port = free_port(), free_port()
            node_dir = directory / f"redis-{n}"
            node_dir.mkdir(parents=True)
            log_path = node_dir / "redis.log"
            argv = ["redis-server", "--bind", HOST, "--port", str(port),
                    "--cluster-enabled", "yes", "--cluster-port", str(bus_port),
                    "--cluster-config-file", str(node_dir / "nodes.conf"),
                    "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                    "--save", "", "--appendonly", "no", "--dir", str(node_dir)]  # fmt: skip
            cluster.nodes.append(Node(port, _spawn(argv, log_path), argv, log_path))
        for node in cluster.nodes:
            _wait(f"{node.address} answering", lambda n=node: _cli("-p", str(n.port), "ping"))
        addresses = [node.address for node in cluster.nodes]
        _cli("--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes")
        for node in cluster.nodes:
            _wait(
                f"{node.address} sees the whole cluster",
                lambda n=node: "cluster_state:ok" in _cli("-p", str(n.port), "cluster", "info"),
            )
    except BaseException:
        cluster.stop()
        raise
    return cluster
