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
from dataclasses import dataclass, field

from memstream.broker.clients import producer
from memstream.cli.deadletters import Reading, Selection, selected
from memstream.events.origin import ORIGIN_HEADER
from memstream.settings import Settings
from memstream.store.database import create_engine, in_lists
from memstream.store.forgets import ForgetSet, ForgetStore, subject_of
from memstream.store.redriven import RedriveLedger
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
        ledger = RedriveLedger(engine, settings.topic(DEAD_LETTER))
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
