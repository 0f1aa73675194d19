"""``summary-check`` records: one per partition per history batch, each conversation on the
partition its own key gives it, and the single form the session stage sends read too."""

from __future__ import annotations

import orjson
import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream.events.checks import partition_of, read_summary_check, summary_checks


def test_partitions_are_kafkas() -> None:
    kafka = DefaultPartitioner()
    for i in range(500):
        key = f"conv-{i}".encode()
        assert partition_of(key, 8) == kafka(key, list(range(8)), list(range(8)))


def test_one_record_per_partition_each_on_its_conversations_partition() -> None:
    conversations = [("t1", f"conv-{i}") for i in range(500)] + [("t1", "conv-1")]
    records = summary_checks(conversations, 8)
    assert len(records) == 8
    found = []
    for key, value in records:
        listed = read_summary_check(value)
        assert all(partition_of(c.encode(), 8) == partition_of(key, 8) for _, c in listed)
        found += listed
    assert sorted(found) == sorted(set(conversations))
    assert summary_checks([], 8) == []


def test_the_single_form_is_read() -> None:
    raw = orjson.dumps({"tenant_id": "t1", "conversation_id": "c1"})
    assert read_summary_check(raw) == [("t1", "c1")]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[1]",
        b'{"tenant_id": 1, "conversation_id": "c"}',
        b'{"conversations": "c1"}',
        b'{"conversations": [["t1"]]}',
        b'{"garbage": 1}',
    ],
)
def test_anything_else_is_refused(raw: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        read_summary_check(raw)
