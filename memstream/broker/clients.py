"""The Kafka clients memstream builds, every one from the same client settings.

``client_options`` is the one place that says how a client reaches the broker; the consumer,
producer and admin factories, and Faust's broker configuration, start from it, and its
security options (TLS, SASL) come from ``memstream_client.contract.security``, which the client
package's publisher (``memstream_client.publisher``) builds its own producer with too, so that
a platform service need not load the server to publish.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError

from memstream.broker.patience import patiently
from memstream.errors import ServiceUnavailable
from memstream.settings import BrokerSettings


def client_options(settings: BrokerSettings) -> dict[str, Any]:
    """What every client memstream builds is given, whatever its kind."""
    return {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        **settings.kafka_security.client_options(),
    }


def make_consumer(settings: BrokerSettings, *topics: str, **options: Any) -> AIOKafkaConsumer:
    """A consumer (subscribed to ``topics`` when named), not started."""
    return AIOKafkaConsumer(*topics, **client_options(settings), **options)


def make_producer(settings: BrokerSettings, **options: Any) -> AIOKafkaProducer:
    """A producer, not started."""
    return AIOKafkaProducer(**client_options(settings), **options)


def make_admin(settings: BrokerSettings, **options: Any) -> AIOKafkaAdminClient:
    """An admin client, not started."""
    return AIOKafkaAdminClient(**client_options(settings), **options)


def group_less_consumer(settings: BrokerSettings) -> AIOKafkaConsumer:
    """A consumer for reading partition ends and records, in no group, committing nothing."""
    return make_consumer(
        settings,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # An empty fetch at a partition's end answers after this long at most.
        fetch_max_wait_ms=50,
    )


def broker_urls(settings: BrokerSettings) -> list[str]:
    """Faust's broker URLs for the ``host:port,host:port`` list the clients are given."""
    servers = settings.kafka_bootstrap_servers
    return [f"kafka://{server.strip()}" for server in servers.split(",") if server.strip()]


@asynccontextmanager
async def admin_client(settings: BrokerSettings) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = make_admin(settings, request_timeout_ms=15000)
    try:
        await admin.start()
    except KafkaConnectionError as exc:
        raise ServiceUnavailable(
            f"Kafka at {settings.kafka_bootstrap_servers} does not answer ({exc}); "
            "start it with `make services` or set MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS."
        ) from exc
    try:
        yield admin
    finally:
        await admin.close()


@asynccontextmanager
async def producer(settings: BrokerSettings, **options: object) -> AsyncIterator[AIOKafkaProducer]:
    """A producer that waits for all in-sync replicas (duplicates are harmless: event ids),
    started once the broker is ready."""

    async def started() -> AIOKafkaProducer:
        client = make_producer(settings, acks="all", linger_ms=5, **options)
        try:
            await client.start()
        except KafkaConnectionError as exc:
            await client.stop()
            raise ServiceUnavailable(
                f"Kafka at {settings.kafka_bootstrap_servers} does not answer ({exc})."
            ) from exc
        except BaseException:
            await client.stop()
            raise
        return client

    client = await patiently(settings, "starting a producer", started)
    try:
        yield client
    finally:
        await client.stop()


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop a group-less consumer; aiokafka's stop re-raises its own task's cancellation, which
    only matters when this task is being cancelled too."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


async def wait_for_broker(settings: BrokerSettings, within: float = 30.0) -> None:
    """Wait until the broker answers metadata requests."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            async with admin_client(settings) as admin:
                await admin.list_topics()
                return
        except ServiceUnavailable:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
