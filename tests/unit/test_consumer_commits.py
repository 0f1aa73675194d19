"""Which offsets the worker's Faust consumer commits (memstream.streams.consumer): never past a
record it did not handle, the first one after a partition was taken over included."""

from __future__ import annotations

from faust.transport.drivers import aiokafka as driver
from faust.types import TP, Message

from memstream.streams.consumer import (
    HOLE_SEEKS,
    IN_FLIGHT_SECONDS,
    App,
    Consumer,
    committable,
    delivery,
    lost,
)
from tests.support.settings import unique

TOPIC = "memory.session-ended"


def consumer() -> Consumer:
    app = App(unique("app"), broker="kafka://127.0.0.1:9092", store="memory://")
    built = app.consumer
    assert isinstance(built, Consumer)
    return built


def test_acknowledged_offsets_commit_only_from_the_next_offset_to_commit():
    assert committable([12, 13, 14], 12)
    assert not committable([13, 14], 12)
    assert not committable([1, 2], 0)
    assert committable([], 12) and committable([13], None)


def test_a_record_is_lost_when_later_ones_are_acknowledged_and_it_is_not_in_flight():
    assert lost([13, 14], 12, in_flight=set(), waited=0)
    # Still being handled (the session stage handles records side by side), for a while.
    assert not lost([13, 14], 12, in_flight={12}, waited=1)
    assert lost([13, 14], 12, in_flight={12}, waited=IN_FLIGHT_SECONDS)
    assert not lost([12, 13], 12, in_flight=set(), waited=0)
    assert not lost([], 12, in_flight=set(), waited=0)


def test_the_record_at_the_committed_offset_is_not_committed_unhandled():
    """Taken over at committed offset 12, the worker handled 13 and 14 but never 12 (dropped
    around the rebalance): Faust alone would commit 15."""
    tp = TP(TOPIC, 1)
    c = consumer()
    c._committed_offset[tp] = 12
    c._acked[tp] = [13, 14]
    assert c._new_offset(tp) is None
    c._acked[tp] = [12, 13, 14]
    assert c._new_offset(tp) == 15


def test_the_first_record_of_a_partition_never_committed_is_not_committed_unhandled():
    """A partition with no committed offset was sought to its beginning, 0: records 1 to 4
    handled without 0 do not move its offset."""
    tp = TP(TOPIC, 0)
    c = consumer()
    c._next_offsets[tp] = 0
    c._acked[tp] = [1, 2, 3, 4]
    assert c._new_offset(tp) is None
    c._acked[tp] = [0, 1, 2, 3, 4]
    assert c._new_offset(tp) == 5


async def test_offsets_faust_did_not_read_are_not_taken_for_missing_ones():
    """Records dropped around a rebalance leave offsets unread after the last one read: Faust
    takes them for a gap (compacted away) and would commit past them."""
    tp = TP(TOPIC, 1)
    c = consumer()
    c._committed_offset[tp] = 17
    c._read_offset[tp] = 16
    await c._add_gap(tp, 17, 23)
    c._acked[tp] = [24, 25]
    assert c._new_offset(tp) is None


def message(offset: int, generation: int) -> Message:
    return Message(TOPIC, 1, offset, 0.0, 0, None, b"k", b"v", None, generation_id=generation)


def test_a_record_faust_skips_unhandled_is_not_counted_as_acknowledged():
    """Faust's stream acknowledges a record it drops unhandled, one of the previous generation
    or read while the flow is stopped for a rebalance: its offset must not be committed."""
    c = consumer()
    c.app.topics._acking_topics.add(TOPIC)  # as for a topic an agent reads
    c.app.consumer_generation_id = 4
    c.app.flow_control.resume()
    handled = message(11, generation=4)
    assert c.ack(handled) and c._acked[handled.tp] == [11]
    stale = message(12, generation=3)
    assert not c.ack(stale)
    assert stale.acked and c._acked[stale.tp] == [11]
    c.app.flow_control.suspend()
    stopped = message(13, generation=4)
    assert not c.ack(stopped)
    assert c._acked[stopped.tp] == [11]


def test_a_record_past_the_next_one_to_deliver_sends_the_partition_back():
    assert delivery(12, 12, sought=0) == "deliver"
    assert delivery(12, 9, sought=0) == "deliver"  # read again after a seek back
    assert delivery(None, 40, sought=0) == "deliver"  # a partition not sought yet
    assert delivery(12, 13, sought=0) == "seek"
    # Sought back as often as it takes a record to come back: the topic no longer has it.
    assert delivery(12, 13, sought=HOLE_SEEKS) == "deliver"


async def test_records_after_a_dropped_one_wait_for_it(monkeypatch):
    """At a handover Faust dropped 12 (fetched before its partitions were sought back): 13 and
    14 are not handed to the stage before 12 is read again, nor is another partition held."""
    tp, other = TP(TOPIC, 1), TP(TOPIC, 2)
    batches = [
        [(tp, message(13, 1)), (other, message(5, 1)), (tp, message(14, 1))],
        [(tp, message(12, 1)), (tp, message(13, 1))],
    ]
    sought: list[tuple[TP, int]] = []

    async def fetched(self, *_):
        for record in batches.pop(0):
            yield record

    async def seek(self, partition, offset):
        sought.append((partition, offset))

    monkeypatch.setattr(driver.Consumer, "getmany", fetched)
    monkeypatch.setattr(driver.Consumer, "seek", seek)
    c = consumer()
    c._expected = {tp: 12, other: 5}
    first = [(t, m.offset) for t, m in [x async for x in c.getmany(1.0)]]
    assert first == [(other, 5)] and sought == [(tp, 12)]
    second = [(t, m.offset) for t, m in [x async for x in c.getmany(1.0)]]
    assert second == [(tp, 12), (tp, 13)]
    assert c._expected == {tp: 14, other: 6}
