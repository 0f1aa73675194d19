"""Process-wide resources of a worker, shared by its agents and built on first use."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import faust

from memstream import metrics, tracing
from memstream.events.deadletter import DeadLetter, SourceRecord
from memstream.events.origin import Origin, origin_in
from memstream.forget import Forgotten, erase_memories
from memstream.llm import LLMClient
from memstream.providers.router import ProviderRouter
from memstream.runtime import Resources
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.marks import MarkStore
from memstream.store.summaries import SummaryStore
from memstream.streams.app import settings
from memstream.streams.topics import dead_letter


@cache
def resources() -> Resources:
    return Resources.open(settings)


@cache
def router() -> ProviderRouter:
    return ProviderRouter(
        resources().engine, settings, config_cache_seconds=settings.agent_config_cache_seconds
    )


@cache
def marks() -> MarkStore:
    return MarkStore(resources().engine)


@cache
def summaries() -> SummaryStore:
    return SummaryStore(resources().engine)


@cache
def forgets() -> ForgetSet:
    """This worker's copy of the forget records (``memstream.store.forgets``)."""
    return ForgetSet(ForgetStore(resources().engine), settings.forget_refresh_seconds)


async def forgotten_before(tenant_id: str, user_id: str, origin: Origin | None) -> bool:
    """Whether the user was forgotten after the public record at ``origin`` was sent."""
    await forgets().refresh()
    return forgets().before(tenant_id, user_id, origin)


async def overtaken(tenant_id: str, user_id: str, origin: Origin | None, stage: str) -> bool:
    """After a write of the user's memories: whether a forget began after the record at
    ``origin`` was sent, seen now, in which case what the write added is taken back."""
    await forgets().refresh(fresh=True)
    if not forgets().before(tenant_id, user_id, origin):
        return False
    await erase_memories(router(), resources().engine, tenant_id, user_id, Forgotten())
    metrics.EVENTS.labels(stage, "taken_back_forgotten").inc()
    return True


@cache
def llm() -> LLMClient | None:
    return LLMClient.from_settings(settings)


def source_of(event: faust.EventT[Any]) -> SourceRecord:
    message = event.message
    headers = message.headers or ()
    return SourceRecord(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp=message.timestamp,
        key=message.key,
        value=message.value,
        headers=message.headers,
        origin=origin_in(headers.items() if isinstance(headers, Mapping) else headers),
    )


async def publish_dead_letters(letters: Sequence[DeadLetter]) -> None:
    """Send every letter and wait until the broker has them all (before offsets move on)."""
    pending = [
        await dead_letter.send(key=letter.key, value=letter.value, headers=list(letter.headers))
        for letter in letters
    ]
    await asyncio.gather(*pending)


async def send_durably(
    topic: faust.TopicT,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: float | None = None,
) -> None:
    """Send and wait for the broker's acknowledgement, so the input may be acknowledged;
    ``timestamp`` (seconds) is the record's Kafka time, now when None."""
    traced = tracing.headers(headers)  # the current trace goes on with the record
    await (await topic.send(key=key, value=value, headers=traced, timestamp=timestamp))
