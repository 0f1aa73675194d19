"""A Kafka node of a test's own: a new KRaft cluster formatted in a temporary directory, on
ports of its own, from the jars ``make services`` fetched (``scripts/services.sh``); a
``SecuredKraftNode`` takes clients only over SASL (SCRAM) and TLS."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from tests.support import REPO
from tests.support.certificates import TlsFiles, tls_files
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
    def formatted(cls, directory: Path) -> Self:
        directory.mkdir(parents=True, exist_ok=True)
        node = cls(directory, free_port(), free_port())
        node._prepare()
        node.properties.write_text(node._listeners() + node._common_properties())
        cluster = node._tool("kafka.tools.StorageTool", "random-uuid").strip()
        node._tool(
            "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(node.properties),
            *node._format_options(),
        )  # fmt: skip
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

    def _prepare(self) -> None:
        """What the node needs before its properties are written."""

    def _format_options(self) -> list[str]:
        return []

    def _listeners(self) -> str:
        return f"""listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
"""

    def _common_properties(self) -> str:
        # As scripts/services.sh configures the suite's broker, on this node's ports and data.
        return f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{self.controller_port}
controller.listener.names=CONTROLLER
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


SCRAM_USER = "memstream"
SCRAM_PASSWORD = "memstream-test-secret"


@dataclass
class SecuredKraftNode(KraftNode):
    """A node whose clients connect over SASL_PLAINTEXT with SCRAM-SHA-512 (on ``port``, also
    between brokers), over TLS with a client certificate (on ``ssl_port``) or over SASL_SSL
    with SCRAM-SHA-512 (on ``sasl_ssl_port``); only the controller's own listener is plain."""

    ssl_port: int = field(default_factory=free_port)
    sasl_ssl_port: int = field(default_factory=free_port)
    tls: TlsFiles | None = None

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    def _prepare(self) -> None:
        self.tls = tls_files(self.directory / "tls")

    def _format_options(self) -> list[str]:
        # The user exists from the first start: a broker that talks to itself over SASL needs it.
        return ["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"]

    def _listeners(self) -> str:
        assert self.tls is not None
        clients = ",".join(
            [
                f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                f"SSL://127.0.0.1:{self.ssl_port}",
                f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}",
            ]
        )
        protocols = "SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";'
        )
        return f"""listeners={clients},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners={clients}
listener.security.protocol.map={protocols},CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}
ssl.keystore.type=PEM
ssl.keystore.location={self.tls.broker}
ssl.truststore.type=PEM
ssl.truststore.location={self.tls.ca}
listener.name.ssl.ssl.client.auth=required
"""
