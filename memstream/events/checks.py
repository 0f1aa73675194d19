"""``summary-check`` records (internal): the conversations the summary stage should look at.

The history stage writes one record per partition per batch, listing every conversation of the
batch that lands on that partition, instead of one record per conversation: a batch touches
hundreds of conversations, and each record costs the worker a produce call. A conversation
always lands on the partition its own key would (Kafka's default partitioner: murmur2 of the
UTF-8 ``conversation_id``), so one summary worker handles each conversation. The session stage
writes the single form, ``{"tenant_id", "conversation_id"}``; both are read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import orjson
from aiokafka.partitioner import murmur2

Conversation = tuple[str, str]  # (tenant_id, conversation_id)


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives ``key`` among ``partitions``."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def summary_checks(
    conversations: Iterable[Conversation], partitions: int
) -> list[tuple[bytes, bytes]]:
    """(key, value) records asking about ``conversations``, one per partition they land on;
    the key is one of its conversations' ids, so the record lands there too."""
    by_partition: dict[int, list[Conversation]] = defaultdict(list)
    for tenant_id, conversation_id in sorted(set(conversations)):
        by_partition[partition_of(conversation_id.encode(), partitions)].append(
            (tenant_id, conversation_id)
        )
    return [
        (group[0][1].encode(), orjson.dumps({"conversations": group}))
        for _, group in sorted(by_partition.items())
    ]


def read_summary_check(raw: bytes | None) -> list[Conversation]:
    """The conversations of a ``summary-check`` value; ValueError or TypeError when it is none."""
    record = orjson.loads(raw or b"")
    if not isinstance(record, dict):
        raise TypeError("a summary check is a JSON object")
    listed: Any = record.get("conversations")
    if listed is None:
        listed = [[record.get("tenant_id"), record.get("conversation_id")]]
    if not isinstance(listed, list):
        raise TypeError("conversations must be a list")
    out: list[Conversation] = []
    for item in listed:
        if not (
            isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item)
        ):
            raise TypeError("each conversation is [tenant_id, conversation_id], both strings")
        out.append((item[0], item[1]))
    return out
