"""Where partitions end and how far the worker group has come, from the answers every
Kafka-compatible broker memstream runs on gets right.

Not every broker answers ListOffsets right. The bundled one (Tansu, ``memstream dev``) answers
"latest" with the first offset of the partition's last batch + 1, so a partition whose last
batch holds several records looks shorter than it is, and answers a time past the last record
with offset 0 instead of "none". The high watermark in a fetch response and the committed
offsets of named partitions (OffsetFetch) are right on Apache Kafka and on Tansu, so partition
ends are read from a fetch, and time lookups are used only where a probe shows they work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from memstream.broker.clients import make_consumer
from memstream.errors import ServiceUnavailable
from memstream.settings import BrokerSettings

# A year ahead: no record of a live topic carries a later time.
_PROBE_AHEAD_MS = 365 * 24 * 3600 * 1000


async def high_watermarks(
    consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition], within: float = 15.0
) -> dict[TopicPartition, int]:
    """Each partition's end (the offset its next record gets) as a fetch response reports it.

    ``consumer`` must be group-less (``clients.group_less_consumer``); its assignment is
    replaced.
    """
    if not tps:
        return {}
    listed: dict[TopicPartition, int] = await consumer.end_offsets(list(tps))
    # A fresh assignment forgets the high watermarks of earlier fetches.
    consumer.assign(list(tps))
    for tp in tps:
        consumer.seek(tp, listed[tp])
    deadline = time.monotonic() + within
    while any(consumer.highwater(tp) is None for tp in tps):
        if time.monotonic() > deadline:
            raise ServiceUnavailable(f"no fetch answer for {sorted(map(str, tps))} in {within}s")
        # What a broker that listed too short an end returns here lies before the real end.
        await consumer.getmany(*tps, timeout_ms=100, max_records=500)
    return {tp: max(listed[tp], consumer.highwater(tp) or 0) for tp in tps}


async def committed(
    admin: AIOKafkaAdminClient, group: str, tps: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The offsets ``group`` has committed on ``tps`` (0 where it has committed none).

    The partitions are always named: the bundled broker drops the connection when asked for
    every partition of a group at once.
    """
    if not tps:
        return {}
    found = await admin.list_consumer_group_offsets(group, partitions=list(tps))
    out = {}
    for tp in tps:
        meta = found.get(tp)
        out[tp] = meta.offset if meta is not None and meta.offset >= 0 else 0
    return out


async def commit(
    settings: BrokerSettings, group: str, positions: dict[TopicPartition, int]
) -> None:
    """Commit ``positions`` for ``group`` from outside it; the broker refuses (KafkaError)
    while the group has live members."""
    consumer = make_consumer(settings, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(positions))
        await consumer.commit(positions)
    finally:
        await consumer.stop()


async def target_offsets(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], to: datetime | None
) -> dict[TopicPartition, int]:
    """Per partition, the first offset at or after ``to`` as the broker lists it (the start
    for None, the end where no record is that late)."""
    start: dict[TopicPartition, int] = await consumer.beginning_offsets(tps)
    if to is None:
        return start
    end: dict[TopicPartition, int] = await consumer.end_offsets(tps)
    stamp = int(to.timestamp() * 1000)
    found = await consumer.offsets_for_times(dict.fromkeys(tps, stamp))
    # No record at or after the time: nothing to replay on that partition (its end).
    return {tp: found[tp].offset if found[tp] is not None else end[tp] for tp in tps}


class TimeLookups:
    """Whether the broker answers "the first offset at or after a time" right, found out once
    per process from a partition that holds records: a time a year ahead must find nothing."""

    def __init__(self) -> None:
        self.work: bool | None = None

    async def check(self, consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
        if self.work is None:
            filled = [tp for tp, end in ends.items() if end > 0]
            if not filled:
                return False  # nothing to probe yet; the caller falls back to the ends
            probe = int(time.time() * 1000) + _PROBE_AHEAD_MS
            try:
                found = await consumer.offsets_for_times(dict.fromkeys(filled, probe))
            except KafkaError:
                self.work = False
            else:
                self.work = all(found[tp] is None for tp in filled)
        return self.work

    async def first_at_or_after(
        self, consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int], timestamp_ms: int
    ) -> dict[TopicPartition, int]:
        """Per partition, the offset of the first record at or after ``timestamp_ms``, or the
        end when none is (or when the broker cannot say: then every record counts)."""
        if not await self.check(consumer, ends):
            return dict(ends)
        found = await consumer.offsets_for_times(dict.fromkeys(ends, timestamp_ms))
        out = {}
        for tp, end in ends.items():
            hit = found.get(tp)
            trusted = hit is not None and hit.timestamp >= timestamp_ms and hit.offset <= end
            out[tp] = hit.offset if hit is not None and trusted else end
        return out
