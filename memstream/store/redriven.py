"""The ``redriven_letter`` rows: each dead letter ``memstream redrive`` sent back, known by
where it sits in the dead-letter topic, recorded as "sending" before it is sent and "sent"
once the broker has it, so that no letter is ever sent twice (``memstream.cli.redrive``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.database import in_lists
from memstream.store.schema import redriven_letter
from memstream_client.contract.deadletter import Letter


class RedriveLedger:
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
