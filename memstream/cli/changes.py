"""``memstream changes``: the ``memory-changed`` stream for an operator, one line per change
(or the JSON values as they are), filtered by tenant and user; ``--follow`` keeps reading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from aiokafka import ConsumerRecord, TopicPartition

from memstream.broker.clients import group_less_consumer, stop_consumer
from memstream.broker.offsets import target_offsets
from memstream.broker.patience import patiently
from memstream.broker.topics import ensure_topics, partitions_of, records_until_now
from memstream.settings import BrokerSettings
from memstream_client.contract.topics import MEMORY_CHANGED

PREVIEW_CHARS = 60


@dataclass(frozen=True)
class Filter:
    """Which changes are shown: one tenant's, one user's (none named: all)."""

    tenant_id: str | None = None
    user_id: str | None = None

    def wants(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        if self.tenant_id is not None and value.get("tenant_id") != self.tenant_id:
            return False
        return self.user_id is None or value.get("user_id") == self.user_id


def line(value: dict[str, Any]) -> str:
    """One change, readable: when, what, whose, which memory, why, and its text or links."""
    cause = str(value.get("cause", "?"))
    if value.get("conversation_id"):
        cause += f" {value['conversation_id']}"
    detail = ""
    if value.get("change") == "added":
        text = " ".join(str(value.get("content", "")).split())
        detail = repr(text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…")
        if value.get("supersedes"):
            detail += f" supersedes {','.join(value['supersedes'])}"
    elif value.get("superseded_by"):
        detail = f"by {','.join(value['superseded_by'])}"
    return "  ".join(
        [
            str(value.get("changed_at", "?")),
            f"{value.get('change', '?'):<10}",
            f"{value.get('tenant_id')}/{value.get('user_id')}",
            f"{value.get('cube_id')}:{value.get('memory_id')}",
            cause,
            detail,
        ]
    ).rstrip()


def _decoded(record: ConsumerRecord[bytes, bytes]) -> Any:
    try:
        return orjson.loads(record.value or b"")
    except orjson.JSONDecodeError:
        return None


async def _following(
    settings: BrokerSettings, topic: str, since: datetime | None
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Every record from ``since`` (else from now on), as it arrives, until cancelled."""
    tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
    consumer = group_less_consumer(settings)
    try:
        await patiently(settings, f"reading {topic}", consumer.start)
        consumer.assign(tps)
        if since is None:
            start: dict[TopicPartition, int] = await consumer.end_offsets(tps)
        else:
            start = await target_offsets(consumer, tps, since)
        for tp in tps:
            consumer.seek(tp, start[tp])
        while True:
            batch = await consumer.getmany(*tps, timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    yield record
    finally:
        await stop_consumer(consumer)


async def show(
    settings: BrokerSettings,
    selection: Filter,
    *,
    follow: bool = False,
    since: datetime | None = None,
    as_json: bool = False,
    out: Callable[[str], None] = print,
) -> int:
    """Print the selected changes (all up to now, or from now on with ``follow``); answers
    how many were shown."""
    topic = settings.topic(MEMORY_CHANGED)
    await ensure_topics(settings, (MEMORY_CHANGED,))
    records = (
        _following(settings, topic, since) if follow else records_until_now(settings, topic, since)
    )
    shown = 0
    async for record in records:
        value = _decoded(record)
        if not selection.wants(value):
            continue
        out(orjson.dumps(value).decode() if as_json else line(value))
        shown += 1
    return shown
