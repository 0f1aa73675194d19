"""The Faust consumer memstream runs: aiokafka's, with fixes to how it seeks after a rebalance
(a partition with no committed offset goes back to its beginning), to which offsets it commits
(only a run that starts at the next offset to commit) and to the order it hands records on
(docs/design/faust-consumer.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers import aiokafka as driver
from faust.types import TP, Message, TransportT
from mode.utils.futures import notify

log = logging.getLogger(__name__)

CHANGELOG_SUFFIX = "-changelog"
REREAD_AFTER_SECONDS = 10.0
"""How long a partition sought back to a lost record waits before it is sought back again (the
record may take that long to come back on a busy worker)."""
HOLE_SEEKS = 3
"""How many times a partition is sought back to a record that does not come: past that it is
gone (the topic's retention deleted it), and the records after it are handed on."""
IN_FLIGHT_SECONDS = 45.0
"""How long a missing record counts as in flight while Faust still holds it unacknowledged:
the session stage handles records side by side and waits up to 30 s on the history stage, but
a record Faust dropped around a rebalance stays in its set of unacknowledged ones until the
next garbage collection, and is lost all the same."""


async def seek_to_committed(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int | None]:
    """Seek every assigned partition to its committed offset, and to its beginning when it
    has none: table changelogs aside, which Faust's recovery positions itself. Answers each
    partition's next offset to read (its beginning's where none was committed)."""
    committed: dict[TopicPartition, int | None] = await consumer.seek_to_committed()
    uncommitted = [
        tp for tp, offset in committed.items() if not offset and not is_changelog(tp.topic)
    ]
    if uncommitted:
        await consumer.seek_to_beginning(*uncommitted)
        beginnings: dict[TopicPartition, int] = await consumer.beginning_offsets(uncommitted)
        committed.update(beginnings)
    return committed


def is_changelog(topic: str) -> bool:
    return topic.endswith(CHANGELOG_SUFFIX)


def committable(acked: Collection[int], next_offset: int | None) -> bool:
    """Whether a partition's acknowledged offsets may be committed: only once the record at its
    next offset to commit (None: not known) is among them."""
    return next_offset is None or not acked or min(acked) <= next_offset


def lost(
    acked: Collection[int], next_offset: int | None, in_flight: Collection[int], waited: float
) -> bool:
    """Whether the record at a partition's next offset to commit will never be acknowledged
    unless read again: later ones are, and it is not being handled (or has not been for the
    ``waited`` seconds since later ones were, see ``IN_FLIGHT_SECONDS``)."""
    if committable(acked, next_offset):
        return False
    return next_offset not in in_flight or waited >= IN_FLIGHT_SECONDS


def delivery(expected: int | None, offset: int, sought: int) -> str:
    """What becomes of a record at ``offset`` when its partition should deliver ``expected``
    next (None: not known) and was sought back to it ``sought`` times: ``deliver`` it (a
    record read again is delivered again: the stages are idempotent), or ``seek`` back to
    ``expected``, the records between having been dropped unhandled."""
    if expected is None or offset <= expected or sought >= HOLE_SEEKS:
        return "deliver"
    return "seek"


class ConsumerThread(driver.AIOKafkaConsumerThread):
    async def seek_to_committed(self) -> Mapping[TP, int]:
        result: Mapping[TP, int] = await self.call_thread(
            seek_to_committed, self._ensure_consumer()
        )
        return result


class Consumer(driver.Consumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_offsets: dict[TP, int] = {}  # where each partition was sought to
        self._reread: dict[TP, tuple[int, float]] = {}  # sought back to, and when
        self._missing: dict[TP, tuple[int, float]] = {}  # a next record missing, since when
        self._expected: dict[TP, int] = {}  # the next offset to hand on, per partition
        self._holes: dict[TP, tuple[int, int]] = {}  # sought back to, how many times

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def seek_to_committed(self) -> Mapping[TP, int]:
        committed = await super().seek_to_committed()
        self._next_offsets = {tp: offset for tp, offset in committed.items() if offset is not None}
        self._expected = {
            tp: offset for tp, offset in self._next_offsets.items() if not is_changelog(tp.topic)
        }
        return committed

    async def seek(self, partition: TP, offset: int) -> None:
        await super().seek(partition, offset)
        if not is_changelog(partition.topic):
            self._expected[partition] = offset

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:  # noqa: ASYNC109 (Faust's signature)
        """Faust's batch, each partition's records handed on only in order (``delivery``)."""
        holes: dict[TP, int] = {}
        async for tp, message in super().getmany(timeout):
            if tp in holes:
                continue
            expected = self._expected.get(tp)
            hole, sought = self._holes.get(tp, (-1, 0))
            verdict = delivery(expected, message.offset, sought if hole == expected else 0)
            if verdict == "seek" and expected is not None:
                holes[tp] = expected
                continue
            if expected is not None and message.offset > expected:
                log.warning(
                    "%s[%d]@%d..%d did not come back: gone, the records after them go on",
                    tp.topic, tp.partition, expected, message.offset - 1,
                )  # fmt: skip
            if expected is not None:
                self._expected[tp] = max(expected, message.offset + 1)
                self._holes.pop(tp, None)
            yield tp, message
        for tp, offset in holes.items():
            hole, sought = self._holes.get(tp, (-1, 0))
            self._holes[tp] = (offset, sought + 1 if hole == offset else 1)
            log.warning(
                "%s[%d]@%d was skipped on its way to the stages: read again from it",
                tp.topic, tp.partition, offset,
            )  # fmt: skip
            await self.seek(tp, offset)

    def _next_offset(self, tp: TP) -> int | None:
        committed: int | None = self._committed_offset[tp]
        return committed if committed is not None else self._next_offsets.get(tp)

    def _new_offset(self, tp: TP) -> int | None:
        if not committable(self._acked[tp], self._next_offset(tp)):
            return None
        offset: int | None = super()._new_offset(tp)
        return offset

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Faust takes offsets it did not read after the one it read last for offsets that do
        not exist (compacted away, transaction markers), and commits past them. memstream's
        stage topics have neither: offsets not read there were dropped around a rebalance
        (read, sought back, not read again), so they are read again, never taken for done."""

    def ack(self, message: Message) -> bool:
        if self._skipped(message):
            # Not handled: nothing is recorded, so its offset is not committed.
            message.acked = True
            self._unacked_messages.discard(message)
            notify(self._waiting_for_ack)  # a rebalance waiting for the records in flight
            return False
        acked: bool = super().ack(message)
        return acked

    def _skipped(self, message: Message) -> bool:
        """Whether Faust acknowledges ``message`` without handling it (see the module
        docstring): its stream drops a record of the previous generation or read while the
        flow is stopped."""
        app = self.app
        stale = getattr(message, "generation_id", None) != app.consumer_generation_id
        return bool(stale or not app.flow_control.is_active())

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        done: bool = await super().force_commit(topics, start_new_transaction=start_new_transaction)
        await self._read_lost_again()
        return done

    async def _read_lost_again(self) -> None:
        """Seek each partition whose next record is lost (``lost``) back to it."""
        assigned = self.assignment()
        in_flight: dict[TP, set[int]] = {}
        for message in list(self._unacked_messages):
            if not message.acked:
                in_flight.setdefault(message.tp, set()).add(message.offset)
        now = time.monotonic()
        for tp, acked in list(self._acked.items()):
            next_offset = self._next_offset(tp)
            if next_offset is None or tp not in assigned or committable(acked, next_offset):
                self._missing.pop(tp, None)
                continue
            missing, since = self._missing.get(tp, (-1, now))
            since = since if missing == next_offset else now
            self._missing[tp] = (next_offset, since)
            if not lost(acked, next_offset, in_flight.get(tp, set()), now - since):
                continue
            offset, when = self._reread.get(tp, (-1, 0.0))
            if offset == next_offset and now - when < REREAD_AFTER_SECONDS:
                continue
            log.warning(
                "%s[%d]@%d was never handled while later records were: read again from it",
                tp.topic, tp.partition, next_offset,
            )  # fmt: skip
            self._reread[tp] = (next_offset, now)
            await self.seek(tp, next_offset)


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


__all__ = [
    "App",
    "Consumer",
    "ConsumerThread",
    "Transport",
    "committable",
    "delivery",
    "lost",
    "seek_to_committed",
]
