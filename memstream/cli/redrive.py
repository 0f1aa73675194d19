"""``memstream redrive``: dead letters back to the topic they came from, each at most once.

A letter is known by where it sits in the dead-letter topic (partition, offset). Before it is
sent, that key is written to the ``redriven_letter`` table as "sending"; once the broker has
the record it becomes "sent". A later run skips both, so no letter is ever sent twice: not by
a rerun, not by two runs at once, not after a run that was interrupted. A letter interrupted
between the two states may or may not have reached its topic; it is reported, never resent.
A letter of a user forgotten after it was first sent is left where it is, and counted. A letter
goes back with its origin (``memstream.events.origin``), so its stage can tell the same.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Connection, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.clients import producer
from memstream.cli.deadletters import Reading, Selection, selected
from memstream.events.origin import ORIGIN_HEADER
from memstream.settings import Settings
from memstream.store.database import create_engine, in_lists
from memstream.store.forgets import ForgetSet, ForgetStore, subject_of
from memstream.store.schema import redriven_letter
from memstream.topology import REDRIVE_TOPICS
from memstream_client.contract.deadletter import Letter
from memstream_client.contract.topics import DEAD_LETTER, MESSAGE_WRITTEN

REDRIVEN_HEADER = "memstream-redriven-from"


@dataclass
class Report:
    """What a run did (or, dry, would do): counts by (reason, stage), and what it left alone."""

    dry_run: bool
    sent: Counter[tuple[str, str]] = field(default_factory=Counter)
    already: int = 0  # sent back by an earlier run
    interrupted: int = 0  # recorded by an earlier run that never confirmed the send
    foreign: int = 0  # from a topic no stage of this deployment reads
    unreadable: int = 0  # records of the dead-letter topic that are no dead letters
    forgotten: int = 0  # of a user forgotten since

    def lines(self) -> list[str]:
        verb = "would send back" if self.dry_run else "sent back"
        total = sum(self.sent.values())
        out = [f"{verb} {total} dead letter{'' if total == 1 else 's'}"]
        out += [f"  {r}/{s}: {n}" for (r, s), n in sorted(self.sent.items())]
        for count, what in (
            (self.already, "already sent back by an earlier run"),
            (self.interrupted, "interrupted in an earlier run, not sent again"),
            (self.foreign, "skipped: their source topic is not one memstream reads"),
            (self.unreadable, "skipped: records of the dead-letter topic that are no letters"),
            (self.forgotten, "skipped: their user was forgotten after they were sent"),
        ):
            if count:
                out.append(f"{what}: {count}")
        return out


async def redrive(settings: Settings, selection: Selection, *, dry_run: bool) -> Report:
    report = Report(dry_run)
    reading = Reading()
    inputs = {settings.topic(name) for name in REDRIVE_TOPICS}
    letters = []
    async for letter in selected(settings, selection, reading):
        if letter.source_topic in inputs:
            letters.append(letter)
        else:
            report.foreign += 1
    report.unreadable = reading.unreadable
    engine = create_engine(settings.database_url, pool_size=1)
    try:
        forgets = ForgetSet(ForgetStore(engine))
        await forgets.refresh(fresh=True)
        history = settings.topic(MESSAGE_WRITTEN)
        kept = [letter for letter in letters if not _forgotten(forgets, letter, history)]
        report.forgotten = len(letters) - len(kept)
        letters = kept
        ledger = Ledger(engine, settings.topic(DEAD_LETTER))
        await ledger.ensure()
        states = await ledger.states(letters)
        report.already = sum(1 for state in states.values() if state == "sent")
        report.interrupted = len(states) - report.already
        todo = [letter for letter in letters if (letter.partition, letter.offset) not in states]
        if dry_run:
            report.sent.update((letter.reason, letter.stage) for letter in todo)
            return report
        async with producer(settings) as client:
            for batch in in_lists(todo):
                claimed = await ledger.claim(batch)
                report.already += len(batch) - len(claimed)
                sends = [
                    await client.send(
                        letter.source_topic,
                        letter.payload,
                        key=letter.key,
                        headers=[
                            (REDRIVEN_HEADER, ledger.mark(letter)),
                            *_origin(letter),
                            *letter.trace,
                        ],
                    )
                    for letter in claimed
                ]
                await asyncio.gather(*sends)
                await ledger.sent(claimed)
                report.sent.update((letter.reason, letter.stage) for letter in claimed)
    finally:
        await engine.dispose()
    return report


def _forgotten(forgets: ForgetSet, letter: Letter, history_topic: str) -> bool:
    """Whether the letter holds words of a user forgotten after they were first sent (for a
    message, a forget of the history)."""
    subject = subject_of(letter.payload)
    if subject is None:
        return False
    tenant_id, user_id, origin = subject
    history = letter.source_topic == history_topic
    return forgets.before(tenant_id, user_id, origin or letter.first, history=history)


def _origin(letter: Letter) -> list[tuple[str, bytes]]:
    first = letter.first
    return [(ORIGIN_HEADER, first.encode())] if first is not None else []


class Ledger:
    """The ``redriven_letter`` rows of one dead-letter topic."""

    def __init__(self, engine: AsyncEngine, topic: str) -> None:
        self.engine = engine
        self.topic = topic

    def mark(self, letter: Letter) -> bytes:
        return f"{self.topic}:{letter.partition}:{letter.offset}".encode()

    async def ensure(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(_create_ledger)

    async def states(self, letters: Sequence[Letter]) -> dict[tuple[int, int], str]:
        """(partition, offset) -> state of the letters among ``letters`` already recorded."""
        found: dict[tuple[int, int], str] = {}
        keys = sorted({(letter.partition, letter.offset) for letter in letters})
        async with self.engine.connect() as conn:
            for chunk in in_lists(keys):
                query = select(
                    redriven_letter.c.letter_partition,
                    redriven_letter.c.letter_offset,
                    redriven_letter.c.state,
                ).where(
                    redriven_letter.c.topic == self.topic,
                    tuple_(redriven_letter.c.letter_partition, redriven_letter.c.letter_offset).in_(
                        chunk
                    ),
                )
                for row in await conn.execute(query):
                    found[(row.letter_partition, row.letter_offset)] = row.state
        return found

    async def claim(self, letters: Sequence[Letter]) -> list[Letter]:
        """Record ``letters`` as being sent; answers those this run recorded (another run may
        have been first with some)."""
        while True:
            taken = await self.states(letters)
            free = [letter for letter in letters if (letter.partition, letter.offset) not in taken]
            if not free:
                return []
            now = _now()
            rows = [
                {
                    "topic": self.topic,
                    "letter_partition": letter.partition,
                    "letter_offset": letter.offset,
                    "reason": letter.reason[:64],
                    "stage": letter.stage[:64],
                    "target_topic": letter.source_topic,
                    "state": "sending",
                    "claimed_at": now,
                }
                for letter in free
            ]
            try:
                async with self.engine.begin() as conn:
                    await conn.execute(redriven_letter.insert(), rows)
            except IntegrityError:
                continue  # a concurrent run recorded some of them first: look again
            return free

    async def sent(self, letters: Sequence[Letter]) -> None:
        keys = [(letter.partition, letter.offset) for letter in letters]
        if not keys:
            return
        async with self.engine.begin() as conn:
            await conn.execute(
                update(redriven_letter)
                .where(
                    redriven_letter.c.topic == self.topic,
                    tuple_(redriven_letter.c.letter_partition, redriven_letter.c.letter_offset).in_(
                        keys
                    ),
                )
                .values(state="sent", sent_at=_now())
            )


def _create_ledger(conn: Connection) -> None:
    redriven_letter.create(conn, checkfirst=True)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
