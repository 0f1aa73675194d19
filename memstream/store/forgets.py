"""The forget records (``user_forget``): who was forgotten and exactly from where on, and each
process's copy of them, which every stage that writes a user's data asks before it writes.

A record of a user's topic is "before the forget" when its offset lies below the end its
partition had when the forget began; a partition the forget did not see (added since) holds
only later records. The copy is refreshed with one indexed query for the rows added since.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.events.origin import Origin
from memstream.store.schema import conversation_message, memory_change, user_forget

LOOKBACK = 64  # recent rows read again on each refresh (see ``ForgetSet.refresh``)
ORIGIN_FIELDS = ("topic", "partition", "offset")  # a session's origin_* fields
Ends = dict[str, dict[int, int]]  # full topic name -> partition -> end offset
User = tuple[str, str]  # (tenant_id, user_id)


@dataclass(slots=True)
class Forgotten:
    """What every forget of one user covers: the partition ends of all of them, and of the
    ones that purged the history; the record's last message id at the latest."""

    memories: Ends = field(default_factory=dict)
    history: Ends = field(default_factory=dict)
    message_id: int = 0
    change_seq: int = 0

    def add(
        self,
        offsets: Mapping[str, Mapping[Any, Any]],
        purge: bool,
        message_id: int,
        change_seq: int = 0,
    ) -> None:
        for ends in (self.memories, self.history) if purge else (self.memories,):
            for topic, partitions in offsets.items():
                mine = ends.setdefault(topic, {})
                for partition, end in partitions.items():
                    mine[int(partition)] = max(mine.get(int(partition), 0), int(end))
        self.message_id = max(self.message_id, message_id)
        self.change_seq = max(self.change_seq, change_seq)

    def before(self, origin: Origin | None, *, history: bool = False) -> bool:
        """Whether a record at ``origin`` was on its topic before a forget (of the history
        too with ``history``); work with no origin (from earlier versions) counts as before."""
        ends = self.history if history else self.memories
        if not ends:
            return False
        if origin is None:
            return True
        return origin.offset < ends.get(origin.topic, {}).get(origin.partition, 0)


class ForgetStore:
    """The ``user_forget`` rows."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def record(self, tenant_id: str, user_id: str, ends: Ends, *, purge: bool) -> int:
        """Record a forget that begins now, at partition ends ``ends``; answers its id."""
        offsets = {topic: {str(p): e for p, e in parts.items()} for topic, parts in ends.items()}
        async with self.engine.begin() as conn:
            last = (await conn.execute(select(func.max(conversation_message.c.id)))).scalar()
            seq = (await conn.execute(select(func.max(memory_change.c.seq)))).scalar()
            done = await conn.execute(
                user_forget.insert().values(
                    tenant_id=tenant_id,
                    user_id=user_id,
                    purge_history=purge,
                    offsets=offsets,
                    message_id=int(last or 0),
                    change_seq=int(seq or 0),
                    forgotten_at=datetime.now(UTC).replace(tzinfo=None),
                )
            )
        key = done.inserted_primary_key
        return int(key[0]) if key else 0

    async def since(self, last_id: int, known: Sequence[int] = ()) -> list[Any]:
        """The rows recorded after ``last_id`` but ``known``, oldest first."""
        f = user_forget.c
        query = (
            select(f.id, f.tenant_id, f.user_id, f.purge_history, f.offsets)
            .add_columns(f.message_id, f.change_seq)
            .where(f.id > last_id)
            .order_by(f.id)
        )
        if known:
            query = query.where(f.id.not_in(list(known)))
        async with self.engine.connect() as conn:
            return list((await conn.execute(query)).all())


class ForgetSet:
    """One process's copy of every forget, refreshed at most every ``max_age`` seconds (or
    when asked with ``fresh``) by reading only the rows added since."""

    def __init__(self, store: ForgetStore, max_age: float = 1.0) -> None:
        self.store = store
        self.max_age = max_age
        self.users: dict[User, Forgotten] = {}
        self.last_id = 0
        self._applied: list[int] = []  # ids, sorted
        self._log: list[tuple[User, bool]] = []  # the rows applied, in the order applied
        self._read_at = float("-inf")

    async def refresh(self, *, fresh: bool = False) -> int:
        """Bring the copy up to date (unless refreshed within ``max_age`` and not ``fresh``);
        answers a mark for ``since``."""
        if fresh or time.monotonic() - self._read_at >= self.max_age:
            started = time.monotonic()
            # Ids are handed out before commit, so a row can show up after a higher one: the
            # newest ones are read again.
            low = max(0, self.last_id - LOOKBACK)
            known = self._applied[bisect.bisect_right(self._applied, low) :]
            self.apply(await self.store.since(low, known))
            self._read_at = started
        return len(self._log)

    def apply(self, rows: Iterable[Any]) -> None:
        for row in rows:
            at = bisect.bisect_left(self._applied, int(row.id))
            if at < len(self._applied) and self._applied[at] == int(row.id):
                continue
            user = (row.tenant_id, row.user_id)
            purge = bool(row.purge_history)
            self.users.setdefault(user, Forgotten()).add(
                row.offsets, purge, int(row.message_id), int(row.change_seq)
            )
            self.last_id = max(self.last_id, int(row.id))
            self._applied.insert(at, int(row.id))
            self._log.append((user, purge))

    def since(self, mark: int, *, history: bool = False) -> set[User]:
        """The users forgotten (their history too, with ``history``) since ``mark``."""
        return {user for user, purge in self._log[mark:] if purge or not history}

    def of(self, tenant_id: str, user_id: str) -> Forgotten | None:
        return self.users.get((tenant_id, user_id))

    def before(
        self, tenant_id: str, user_id: str, origin: Origin | None, *, history: bool = False
    ) -> bool:
        """Whether the user was forgotten after a record at ``origin`` (as last refreshed)."""
        forgotten = self.users.get((tenant_id, user_id))
        return forgotten is not None and forgotten.before(origin, history=history)


def subject_of(value: bytes | None) -> tuple[str, str, Origin | None] | None:
    """Whose words a stage record holds (tenant, user) and the origin it carries: a public
    event's own fields, or the session an internal record is about; None when it says not."""
    try:
        record = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    session = record.get("session")
    about = session if isinstance(session, dict) else record
    tenant, user = about.get("tenant_id"), about.get("user_id")
    if isinstance(tenant, int | str) and isinstance(user, int | str):
        origin = None
        topic, partition, offset = (about.get(f"origin_{n}") for n in ORIGIN_FIELDS)
        if isinstance(topic, str) and isinstance(partition, int) and isinstance(offset, int):
            origin = Origin(topic, partition, offset)
        return str(tenant), str(user), origin
    return None
