"""A worker started with a brand-new Kafka cluster, as compose, a new environment or a CI job
starts one: the cluster's internal topics do not exist yet and it is not ready when its port
opens. The worker waits the broker out and then runs as on any other cluster."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream.broker.topics import publish
from memstream.store.messages import MessageStore
from tests.support.kafka import message
from tests.support.kraft import KraftNode, missing
from tests.support.processes import WorkerProcess
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

WATCHED_SECONDS = 60.0


@pytest.fixture
def fresh_node(tmp_path: Path) -> Iterator[KraftNode]:
    why = missing()
    if why is not None:
        pytest.fail(why)
    node = KraftNode.formatted(tmp_path / "kafka")
    try:
        yield node
    finally:
        node.stop()


async def test_a_worker_started_with_a_new_cluster_keeps_running_and_storing(
    services, tenant, store: MessageStore, fresh_node: KraftNode, start_worker
):
    settings = isolated_settings(kafka_bootstrap_servers=fresh_node.bootstrap)
    fresh_node.start()
    await asyncio.to_thread(fresh_node.wait_for_port)
    worker: WorkerProcess = start_worker(settings)

    async def stored(count: int) -> bool:
        assert worker.alive(), f"the worker exited:\n{worker.log()[-3000:]}"
        return await store.count(tenant) >= count

    await publish(settings, "message-written", [message(tenant, "conv-1", 0)])
    await eventually(lambda: stored(1), within=120, what="the first message stored")

    # A minute on, it still runs (watched throughout, so a death is seen when it happens)...
    watched_until = time.monotonic() + WATCHED_SECONDS

    async def watched() -> bool:
        assert worker.alive(), f"the worker exited:\n{worker.log()[-3000:]}"
        return time.monotonic() >= watched_until

    await eventually(watched, within=WATCHED_SECONDS + 10, what="a minute of the worker running")
    # ... and still stores what is published.
    await publish(settings, "message-written", [message(tenant, "conv-1", 1)])
    await eventually(lambda: stored(2), within=60, what="a message stored a minute later")
