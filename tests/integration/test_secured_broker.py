"""memstream on a broker that takes clients only over SASL (SCRAM-SHA-512), TLS with a client
certificate, or both (SASL_SSL): the worker, Faust's clients, the client package's publisher,
``memstream publish`` and readiness all reach it through the security settings; a wrong
password stops a command at once with the broker's reason instead of being waited out as an
outage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from memstream.errors import ServiceUnavailable
from memstream.readiness import workers
from memstream.settings import Settings
from memstream.store.messages import MessageStore
from memstream_client import Publisher
from tests.support.kafka import message
from tests.support.kraft import SCRAM_PASSWORD, SCRAM_USER, SecuredKraftNode, missing
from tests.support.processes import WorkerProcess, run_cli
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# Far longer than any test waits: a refused password must not be waited out as an outage.
PATIENT_SECONDS = 900.0


@pytest.fixture(scope="module")
def secured_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKraftNode]:
    why = missing()
    if why is not None:
        pytest.fail(why)
    node = SecuredKraftNode.formatted(tmp_path_factory.mktemp("secured-kafka"))
    node.start()
    try:
        node.wait_for_port()
        yield node
    finally:
        node.stop()


def sasl_settings(node: SecuredKraftNode, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "kafka_bootstrap_servers": node.bootstrap,
        "kafka_security_protocol": "SASL_PLAINTEXT",
        "kafka_sasl_mechanism": "SCRAM-SHA-512",
        "kafka_sasl_username": SCRAM_USER,
        "kafka_sasl_password": SCRAM_PASSWORD,
    }
    return isolated_settings(**{**values, **overrides})


def tls_settings(node: SecuredKraftNode) -> Settings:
    assert node.tls is not None
    return isolated_settings(
        kafka_bootstrap_servers=node.ssl_bootstrap,
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=str(node.tls.ca),
        kafka_ssl_certfile=str(node.tls.client_cert),
        kafka_ssl_keyfile=str(node.tls.client_key),
    )


def sasl_ssl_settings(node: SecuredKraftNode) -> Settings:
    assert node.tls is not None
    return sasl_settings(
        node,
        kafka_bootstrap_servers=node.sasl_ssl_bootstrap,
        kafka_security_protocol="SASL_SSL",
        kafka_ssl_cafile=str(node.tls.ca),
    )


LISTENERS = {
    "sasl_plaintext_scram": sasl_settings,
    "ssl_client_certificate": tls_settings,
    "sasl_ssl_scram": sasl_ssl_settings,
}


@pytest.mark.parametrize("listener", sorted(LISTENERS))
async def test_the_smoke_path_through_a_secured_listener(
    listener: str,
    secured_node: SecuredKraftNode,
    services: Settings,
    tenant: str,
    store: MessageStore,
    start_worker: Any,
    tmp_path: Path,
) -> None:
    settings = LISTENERS[listener](secured_node)
    worker: WorkerProcess = start_worker(settings)

    async def consuming() -> bool:
        assert worker.alive(), f"the worker exited:\n{worker.log()[-3000:]}"
        return (await workers(settings, within=10)).consuming

    await eventually(consuming, within=150, what="readiness: every stage role consumed")

    async with Publisher.from_settings(settings) as publisher:
        await publisher.message(
            tenant_id=tenant,
            user_id="user-1",
            agent_id="agent-1",
            conversation_id="conv-1",
            role="user",
            content="published over the secured listener",
        )

    async def stored(count: int) -> bool:
        assert worker.alive(), f"the worker exited:\n{worker.log()[-3000:]}"
        return await store.count(tenant) >= count

    await eventually(lambda: stored(1), within=60, what="the published message stored")

    lines = tmp_path / "events.jsonl"
    lines.write_bytes(orjson.dumps(message(tenant, "conv-2", 0)) + b"\n")
    done = await asyncio.to_thread(
        run_cli, settings, "publish", str(lines), "--topic", "message-written", timeout=120
    )
    assert done.returncode == 0, done.stderr
    await eventually(lambda: stored(2), within=60, what="the message of memstream publish stored")


async def test_a_wrong_password_stops_a_command_with_the_brokers_reason(
    secured_node: SecuredKraftNode, tmp_path: Path
) -> None:
    wrong = sasl_settings(
        secured_node, kafka_sasl_password="not-the-password", kafka_wait_seconds=PATIENT_SECONDS
    )
    lines = tmp_path / "events.jsonl"
    lines.write_bytes(orjson.dumps(message("tenant-x", "conv-1", 0)) + b"\n")
    # A command that waited the broker out as an outage would outlive the timeout and raise.
    done = await asyncio.to_thread(
        run_cli, wrong, "publish", str(lines), "--topic", "message-written", timeout=120
    )
    assert done.returncode == 2
    assert "refused the SCRAM-SHA-512 credentials of user 'memstream'" in done.stderr
    assert "not-the-password" not in done.stderr


async def test_a_wrong_password_stops_the_worker_and_the_publisher(
    secured_node: SecuredKraftNode, start_worker: Any
) -> None:
    wrong = sasl_settings(
        secured_node, kafka_sasl_password="not-the-password", kafka_wait_seconds=PATIENT_SECONDS
    )
    worker: WorkerProcess = start_worker(wrong)
    with pytest.raises(ServiceUnavailable, match="refused the SCRAM-SHA-512 credentials"):
        async with Publisher.from_settings(wrong):
            pass

    async def exited() -> bool:
        return not worker.alive()

    await eventually(exited, within=120, what="the worker stopped by the refused password")
    assert "refused the SCRAM-SHA-512 credentials" in worker.log()
