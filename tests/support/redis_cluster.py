"""A small Redis Cluster of a test's own (Debian's redis-server, as ``make services`` installs),
for tests that stop one of its masters and must not harm the shared cluster."""

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

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def kill(self) -> None:
        """SIGKILL: the master is gone at once, as a crashed machine would be."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


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
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait(timeout=10)


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
            log = (node_dir / "redis.log").open("wb")
            process = subprocess.Popen(
                ["redis-server", "--bind", HOST, "--port", str(port),
                 "--cluster-enabled", "yes", "--cluster-port", str(bus_port),
                 "--cluster-config-file", str(node_dir / "nodes.conf"),
                 "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                 "--save", "", "--appendonly", "no", "--dir", str(node_dir)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            cluster.nodes.append(Node(port, process))
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
