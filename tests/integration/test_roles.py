"""Stage roles in workers of their own: each role its own consumer group, the whole chain
working across them, a role's group taking over where the app id's group left off, and a
replay rewinding every group of the topic's role."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from memstream import readiness
from memstream.broker import offsets
from memstream.broker.clients import group_less_consumer, stop_consumer
from memstream.broker.groups import live_members
from memstream.broker.topics import partitions, partitions_of, publish
from memstream.settings import Settings
from memstream.store.schema import long_term_memory
from memstream.store.summaries import SummaryStore
from tests.support.kafka import message, session_end
from tests.support.processes import run_cli
from tests.support.settings import free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def said(tenant: str, conversation: str, count: int, start: int = 0) -> list[dict[str, Any]]:
    """A conversation in which the user states facts and the assistant acknowledges them."""
    events = []
    for n in range(start, start + count):
        text = f"I live in Lisbon and my dog is called Rex {n}." if n % 2 == 0 else "Noted."
        events.append(message(tenant, conversation, n, content=text))
    return events


async def committed(settings: Settings, group: str, topic: str) -> int:
    """How many records of ``topic`` the group has committed, all partitions together."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        tps = [
            TopicPartition(settings.topic(topic), p)
            for p in await partitions_of(settings, settings.topic(topic))
        ]
        return sum((await offsets.committed(admin, group, tps)).values())
    finally:
        await admin.close()


async def metric(port: int, name: str, **labels: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


async def test_roles_run_apart_each_in_its_own_group(
    settings: Settings, tenant, store, engine, start_worker
):
    start_worker(settings, "history", stages="history")

    async def history_consumes() -> bool:
        return (await readiness.workers(settings)).roles["history"]

    await eventually(history_consumes, within=60, what="the history role's worker")
    alone = await readiness.workers(settings)
    # Ready means every role has a consuming worker: ingest alone is not the whole system.
    assert not alone.consuming
    assert alone.check() == "error: no worker consumes the stage role(s) summary, longterm"
    memory = settings.model_copy(update={"worker_web_port": free_port()})
    start_worker(memory, "memory", stages="summary,longterm")

    async def all_consume() -> bool:
        return (await readiness.workers(settings)).consuming

    await eventually(all_consume, within=60, what="every role consuming, in two groups")
    shown = (await readiness.workers(settings)).as_json()
    assert {g["group"] for g in shown["groups"] if g["members"]} == {
        settings.app_id,  # the history stage's group
        f"{settings.app_id}-summary-longterm",
    }
    await publish(settings, "message-written", said(tenant, "c1", 24))
    await publish(settings, "session-ended", [session_end(tenant, "c1")])

    summaries = SummaryStore(engine)

    async def summarised() -> bool:
        return await summaries.get(tenant, "c1") is not None

    async def remembered() -> bool:
        query = select(long_term_memory.c.content).where(long_term_memory.c.tenant_id == tenant)
        async with engine.connect() as conn:
            return any("Lisbon" in r.content for r in (await conn.execute(query)).all())

    await eventually(summarised, within=90, what="the summary, written by the summary role")
    await eventually(remembered, within=90, what="memories, from the long-term role")
    assert await store.count(tenant) == 24
    app = settings.app_id
    assert await committed(settings, app, "message-written") == 24

    async def session_committed() -> bool:  # Faust commits acknowledged offsets each second
        return await committed(settings, f"{app}-summary-longterm", "session-ended") == 1

    await eventually(session_committed, within=30, what="the session end's offset committed")
    # Each group reads its own roles' topics only.
    assert await committed(settings, app, "session-ended") == 0
    assert await committed(settings, f"{app}-summary-longterm", "message-written") == 0


async def commit_ends(settings: Settings, group: str, topic: str) -> None:
    """Commit the ends of ``topic`` for ``group``, as a worker that read all of it would."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    reader = group_less_consumer(settings)
    await admin.start()
    await reader.start()
    try:
        tps = await partitions(admin, settings.topic(topic))
        ends = await offsets.high_watermarks(reader, tps)
    finally:
        await stop_consumer(reader)
        await admin.close()
    await offsets.commit(settings, group, ends)


async def test_a_role_group_takes_over_and_a_replay_rewinds_every_group_of_the_role(
    settings: Settings, tenant, start_worker
):
    # Read by a worker of the layout in which the app id's group read every topic.
    await publish(settings, "session-ended", [session_end(tenant, f"c{n}") for n in range(3)])
    await commit_ends(settings, settings.app_id, "session-ended")

    longterm = start_worker(settings, "longterm", stages="longterm")
    group = f"{settings.app_id}-longterm"

    async def joined() -> bool:
        return bool(await live_members(settings, group))

    await eventually(joined, within=60, what="the long-term role's worker in its group")
    assert await committed(settings, group, "session-ended") == 3  # taken over at start
    await publish(settings, "session-ended", [session_end(tenant, "c3")])

    async def handled() -> bool:
        return await committed(settings, group, "session-ended") == 4

    await eventually(handled, what="the new session end")
    port = settings.worker_web_port
    # The long-term role read only what was new: none of the first three again.
    assert await metric(port, "memstream_records_total", stage="session") == 1

    refused = run_cli(settings, "replay", "--topic", "session-ended", "--to", "earliest")
    assert refused.returncode == 2 and group in refused.stderr
    longterm.stop()
    replayed = run_cli(settings, "replay", "--topic", "session-ended", "--to", "earliest")
    assert replayed.returncode == 0, replayed.stderr
    assert f"({settings.app_id})" in replayed.stdout and f"({group})" in replayed.stdout
    assert await committed(settings, group, "session-ended") == 0
    assert await committed(settings, settings.app_id, "session-ended") == 0
