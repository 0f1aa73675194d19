"""A stream partition with no committed offset goes back to its beginning after a rebalance.

Faust drops what it fetched while the group settled and seeks back to the committed offsets;
aiokafka's own seek skips partitions with none, which lost a new topic's first records when a
worker joined (memstream.streams.consumer).
"""

from __future__ import annotations

from aiokafka import TopicPartition
from aiokafka.admin import NewTopic

from memstream.broker.clients import admin_client, make_consumer, make_producer, stop_consumer
from memstream.settings import Settings
from memstream.streams.consumer import App, Consumer, ConsumerThread, seek_to_committed
from tests.support.settings import unique


async def _topic_with_records(settings: Settings, count: int) -> str:
    name = unique("fresh-seek")
    async with admin_client(settings) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    producer = make_producer(settings)
    await producer.start()
    try:
        for partition in (0, 1):
            for i in range(count):
                await producer.send_and_wait(name, f"r{i}".encode(), partition=partition)
    finally:
        await producer.stop()
    return name


async def test_uncommitted_partition_seeks_back_to_its_beginning(settings: Settings) -> None:
    topic = await _topic_with_records(settings, 5)
    fresh, committed = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = make_consumer(
        settings, group_id=unique("group"), enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([fresh, committed])
        await consumer.commit({committed: 3})
        await consumer.seek_to_beginning(fresh, committed)
        # Fetched and then dropped, as Faust drops what a stale generation fetched.
        while await consumer.position(fresh) < 5 or await consumer.position(committed) < 5:
            await consumer.getmany(timeout_ms=500)

        # aiokafka alone leaves the uncommitted partition past its records.
        await consumer.seek_to_committed()
        assert await consumer.position(fresh) == 5
        assert await consumer.position(committed) == 3

        # The uncommitted partition's next offset is its beginning.
        offsets = await seek_to_committed(consumer)
        assert offsets == {fresh: 0, committed: 3}
        assert await consumer.position(fresh) == 0
        assert await consumer.position(committed) == 3
    finally:
        await stop_consumer(consumer)


async def test_changelog_partitions_are_left_to_recovery(settings: Settings) -> None:
    topic = await _topic_with_records(settings, 2)
    changelog = f"{topic}-changelog"
    async with admin_client(settings) as admin:
        await admin.create_topics([NewTopic(changelog, num_partitions=1, replication_factor=1)])
    tp = TopicPartition(changelog, 0)
    producer = make_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(changelog, b"x", partition=0)
    finally:
        await producer.stop()
    consumer = make_consumer(settings, group_id=unique("group"), enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 1
        await seek_to_committed(consumer)
        assert await consumer.position(tp) == 1
    finally:
        await stop_consumer(consumer)


def test_the_worker_app_runs_on_this_consumer() -> None:
    app = App(unique("app"), broker="kafka://127.0.0.1:9092", store="memory://")
    consumer = app.consumer
    assert isinstance(consumer, Consumer)
    assert isinstance(consumer._thread, ConsumerThread)
