"""A Kafka node of a test's own: a new KRaft cluster formatted in a temporary directory, on
ports of its own, from the jars ``make services`` fetched (``scripts/services.sh``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO
from tests.support.settings import free_port

CONF_DIR = REPO / "scripts" / "kafka"


def kafka_libs() -> Path:
    """Where scripts/services.sh keeps the Kafka jars (its MEMSTREAM_SERVICES_DIR, else var/)."""
    state = Path(os.environ.get("MEMSTREAM_SERVICES_DIR") or REPO / "var")
    return state / "kafka" / "libs"


def missing() -> str | None:
    """Why no node can be started here, or None."""
    if shutil.which("java") is None:
        return "no java on PATH: start the services with `make services`"
    if not any(kafka_libs().glob("*.jar")):
        return f"no Kafka jars in {kafka_libs()}: fetch them with `make services`"
    return None


@dataclass
class KraftNode:
    """One combined broker and controller, formatted on first start."""

    directory: Path
    port: int
    controller_port: int
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def formatted(cls, directory: Path) -> KraftNode:
        directory.mkdir(parents=True, exist_ok=True)
        node = cls(directory, free_port(), free_port())
        node._write_properties()
        cluster = node._tool("kafka.tools.StorageTool", "random-uuid").strip()
        node._tool("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(node.properties))
        return node

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "kafka.log"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    "java", "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                    f"-Dlog4j.configuration=file:{CONF_DIR / 'log4j.properties'}",
                    "-cp", f"{kafka_libs()}/*", "kafka.Kafka", str(self.properties),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_for_port(self, within: float = 120.0) -> None:
        """Return as soon as the node accepts connections on its port, before it is ready."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited while starting: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError(f"Kafka's port {self.port} did not open in {within:g} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _tool(self, *args: str) -> str:
        return subprocess.run(
            [
                "java", f"-Dlog4j.configuration=file:{CONF_DIR / 'tools-log4j.properties'}",
                "-cp", f"{kafka_libs()}/*", *args,
            ],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip

    def _write_properties(self) -> None:
        # As scripts/services.sh configures the suite's broker, on this node's ports and data.
        self.properties.write_text(
            f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{self.controller_port}
listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs={self.directory / "data"}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
min.insync.replicas=1
default.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8
auto.create.topics.enable=true
num.partitions=8
group.initial.rebalance.delay.ms=0
"""
        )
