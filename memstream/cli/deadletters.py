"""``memstream dead-letters``: what landed in the dead-letter topic, and the selection of letters
that ``memstream redrive`` shares."""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memstream.broker.topics import records_until_now
from memstream.settings import BrokerSettings
from memstream_client.contract.deadletter import Letter, read_letter
from memstream_client.contract.topics import DEAD_LETTER

PREVIEW_CHARS = 60


@dataclass(frozen=True)
class Selection:
    """Which letters a command looks at: by reason (none named: all), failed since a time."""

    reasons: frozenset[str] = frozenset()
    since: datetime | None = None

    def wants(self, letter: Letter) -> bool:
        if self.reasons and letter.reason not in self.reasons:
            return False
        if self.since is None:
            return True
        return letter.failed_at is not None and letter.failed_at >= self.since


@dataclass
class Reading:
    """The letters read so far, and how many records of the topic were no dead letters."""

    unreadable: int = 0
    letters: list[Letter] = field(default_factory=list)


async def selected(
    settings: BrokerSettings, selection: Selection, reading: Reading
) -> AsyncIterator[Letter]:
    """The selected letters now in the dead-letter topic, oldest first per partition."""
    # Letters are stamped when they failed, so the topic need only be read from ``since``.
    topic = settings.topic(DEAD_LETTER)
    async for record in records_until_now(settings, topic, selection.since):
        try:
            letter = read_letter(
                record.partition, record.offset, record.key, record.value, record.headers
            )
        except ValueError:
            reading.unreadable += 1
            continue
        if selection.wants(letter):
            yield letter


async def newest(settings: BrokerSettings, selection: Selection, limit: int) -> Reading:
    """The newest ``limit`` selected letters, oldest first."""
    reading = Reading()
    kept: deque[Letter] = deque(maxlen=limit)
    async for letter in selected(settings, selection, reading):
        kept.append(letter)
    reading.letters = sorted(kept, key=_when)
    return reading


def _when(letter: Letter) -> tuple[datetime, int, int]:
    moment = letter.failed_at or datetime.min.replace(tzinfo=UTC)
    return moment, letter.partition, letter.offset


def preview(payload: bytes | None, width: int = PREVIEW_CHARS) -> str:
    """The start of a payload on one line: text as is, other bytes as base64."""
    if payload is None:
        return "(no value)"
    try:
        text = " ".join(payload.decode("utf-8").split())
    except UnicodeDecodeError:
        text = "base64:" + base64.b64encode(payload).decode("ascii")
    text = "".join(ch if ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in text)
    return text if len(text) <= width else text[: width - 1] + "\N{HORIZONTAL ELLIPSIS}"


def source_of(letter: Letter) -> str:
    where = letter.source_topic or "?"
    if letter.source_partition is not None:
        where += f"[{letter.source_partition}]"
    if letter.source_offset is not None:
        where += f"@{letter.source_offset}"
    return where


def table(letters: Sequence[Letter]) -> list[str]:
    """One aligned line per letter under a header."""
    rows = [("FAILED AT", "REASON", "STAGE", "SOURCE", "PAYLOAD")]
    for letter in letters:
        failed = "?"
        if letter.failed_at is not None:
            failed = letter.failed_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append(
            (failed, letter.reason, letter.stage, source_of(letter), preview(letter.payload))
        )
    return _aligned(rows)


def _aligned(rows: Iterable[tuple[str, ...]]) -> list[str]:
    rows = list(rows)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]
