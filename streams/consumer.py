"""The Faust consumer memstream runs: aiokafka's, with one fix to how it seeks after a rebalance.

After every rebalance Faust drops the records it fetched while the group was settling and
seeks each stream partition back to its committed offset. aiokafka's ``seek_to_committed``
seeks only when that offset is above 0, so a partition that has none yet (a new topic, a new
group) keeps the position past the dropped records, and they are never handled. Here such a
partition goes back to its beginning, where ``auto_offset_reset="earliest"`` would have
started it: the stages are idempotent, so reading a record twice is safe and skipping one
is not.
"""

from __future__ import annotations

from collections.abc import Mapping

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers import aiokafka as driver
from faust.types import TP, TransportT

CHANGELOG_SUFFIX = "-changelog"


async def seek_to_committed(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int | None]:
    """Seek every assigned partition to its committed offset, and to its beginning when it
    has none: table changelogs aside, which Faust's recovery positions itself."""
    committed: dict[TopicPartition, int | None] = await consumer.seek_to_committed()
    uncommitted = [
        tp for tp, offset in committed.items() if not offset and not is_changelog(tp.topic)
    ]
    if uncommitted:
        await consumer.seek_to_beginning(*uncommitted)
    return committed


def is_changelog(topic: str) -> bool:
    return topic.endswith(CHANGELOG_SUFFIX)


class ConsumerThread(driver.AIOKafkaConsumerThread):
    async def seek_to_committed(self) -> Mapping[TP, int]:
        result: Mapping[TP, int] = await self.call_thread(
            seek_to_committed, self._ensure_consumer()
        )
        return result


class Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(driver.Transport):
    Consumer = Consumer


class App(faust.App):
    """``faust.App`` on the consumer above."""

    def _new_transport(self) -> TransportT:
        transport: TransportT = Transport(self.conf.broker_consumer, self)
        return transport

    def _new_producer_transport(self) -> TransportT:
        transport: TransportT = Transport(self.conf.broker_producer, self)
        return transport


__all__ = ["App", "Consumer", "ConsumerThread", "Transport", "seek_to_committed"]
