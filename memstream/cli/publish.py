"""``memstream publish``: events from a JSON-lines file onto a public topic."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from memstream.broker.clients import producer
from memstream.broker.topics import ensure_topics
from memstream.errors import InvalidEvent
from memstream.settings import Settings
from memstream_client.contract.events import decode_value, parse_message, parse_session_end
from memstream_client.contract.topics import INPUT_TOPICS, MESSAGE_WRITTEN

_WINDOW = 2000  # records in flight before waiting for the broker's acknowledgements


@dataclass
class PublishReport:
    sent: int = 0
    bad_lines: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    key: bytes | None
    value: bytes


def read_lines(
    path: Path, topic_name: str, settings: Settings, *, validate: bool, report: PublishReport
) -> Iterator[Line]:
    """Yield the sendable lines of ``path``; record the others in ``report`` by line number."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            try:
                obj = decode_value(raw)
                if validate:
                    if topic_name == MESSAGE_WRITTEN:
                        parse_message(raw, settings.max_content_chars)
                    else:
                        parse_session_end(raw)
            except InvalidEvent as exc:
                if not validate:
                    # Sent as is, so the worker's dead-letter path can be exercised end to end.
                    yield Line(number, None, raw)
                    continue
                report.bad_lines.append((number, f"{exc.reason}: {exc.detail}"))
                continue
            conversation = obj.get("conversation_id")
            key = None if conversation is None else str(conversation).encode()
            yield Line(number, key, raw)


def count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


async def publish_file(
    settings: Settings,
    path: Path,
    topic_name: str,
    *,
    validate: bool = True,
    progress: bool = True,
) -> PublishReport:
    """Publish every good line of ``path`` (keyed by ``conversation_id``) and wait for acks."""
    if topic_name not in INPUT_TOPICS:
        raise ValueError(f"topic must be one of {', '.join(INPUT_TOPICS)}")
    report = PublishReport()
    await ensure_topics(settings)
    topic = settings.topic(topic_name)
    # The bar counts lines read, sent or skipped, so it ends at 100% whatever was skipped.
    total = count_lines(path)
    bar = tqdm(total=total, unit="line", disable=not progress, desc=topic)
    async with producer(settings) as client:
        pending: list[asyncio.Future[object]] = []
        for line in read_lines(path, topic_name, settings, validate=validate, report=report):
            pending.append(await client.send(topic, line.value, key=line.key))
            if len(pending) >= _WINDOW:
                await _settle(pending, bar, report, read=line.number)
        await _settle(pending, bar, report, read=total)
    bar.close()
    return report


async def _settle(
    pending: list[asyncio.Future[object]], bar: tqdm[Any], report: PublishReport, read: int
) -> None:
    """Wait for the acknowledgements of ``pending``; the first ``read`` lines are then done."""
    await asyncio.gather(*pending)
    report.sent += len(pending)
    bar.update(read - bar.n)
    pending.clear()


def dumps_line(obj: object) -> bytes:
    """One JSON line (the format ``publish`` reads)."""
    return orjson.dumps(obj) + b"\n"
