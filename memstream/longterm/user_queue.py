"""Per-user serial order of the long-term chain's last step: a session of a user is planned
only once the previous one is applied.

The conflict stage plans a session against the user's live memories and applies the plan in
one step, reading records keyed by (tenant, user), so sessions of one user are applied one
after the other, in the order they arrived. An outage must not break that order: a record that
waits out an outage on a retry tier would otherwise be overtaken by the user's next session
(planned without it, so a newer fact would not expire the older one, or the older one would
land last and expire the newer).

So every record joins its user's queue, kept in a table partitioned like the stage's input
(``tables/order.py``), and only the queue's head is worked on:

- The head is planned once and the plan kept with it before anything is written. A second try
  applies the same plan: planning again after a partial write would skip what the first try
  stored and never expire what it superseded.
- An outage sends the head to the retry tier of its attempt (``memstream.failure.tiers``);
  the user's next records wait in the queue, acknowledged, until it comes back. Its horizon
  counts from when it joined the queue, so no record waits longer than the horizon in all.
- Once applied, the next record is head and is worked on at once. One that cannot be applied
  (a failure no wait can fix, or its horizon spent) is dead-lettered and the next is head;
  ``memstream redrive`` sends it back to the end of the queue.

A record that comes back while still queued (a redelivery) is not queued twice, and one that
had copies on the retry tiers is remembered for the horizon once applied, so that a late copy
is not applied a second time after the records that followed it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import orjson

from memstream.events.deadletter import SourceRecord
from memstream.failure.tiers import Failing

MAX_APPLIED_PER_RECORD = 100
"""Records applied while handling one: the rest of a long queue is handled on a copy of its
head sent back to the stage, so that no single record holds a rebalance up for long."""

Table = MutableMapping[bytes, bytes]
Apply = Callable[[bytes, bytes | None, Callable[[bytes], Awaitable[None]]], Awaitable[None]]
"""Apply a record's value with its kept plan (None: not planned yet); ``keep`` is awaited
with the plan before any of it is written."""
Retry = Callable[[SourceRecord, Failing, Exception], Awaitable[bool]]
"""Send a record to the retry tier after its failed try (``Failing``: the tries before it);
False once its horizon is spent."""
DeadLetter = Callable[[SourceRecord, str, str], Awaitable[None]]
Classify = Callable[[BaseException], "str | None"]
"""The dead-letter reason of a failure, None for an outage (``memstream.failure.classify``)."""
Resend = Callable[[SourceRecord], Awaitable[None]]


def digest_of(value: bytes | None) -> str:
    """A record's identity in its user's queue: the same value is the same record."""
    return hashlib.sha256(value or b"").hexdigest()[:32]


class Admission(Enum):
    HEAD = "head"  # the queue's head: work on it now
    QUEUED = "queued"  # behind an earlier record of the user
    KNOWN = "known"  # queued already, or applied already


@dataclass(slots=True)
class Entry:
    """A queued record: where it came from, when it joined, its plan once made."""

    source: SourceRecord
    since: float
    plan: bytes | None = None
    copies: bool = False  # copies of it were sent to the retry tiers or back to the stage

    @property
    def digest(self) -> str:
        return digest_of(self.source.value)

    def encode(self) -> bytes:
        s = self.source
        return orjson.dumps(
            {
                "source": [s.topic, s.partition, s.offset, s.timestamp, _b64(s.key), _b64(s.value)],
                "since": self.since,
                "plan": _b64(self.plan),
                "copies": self.copies,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> Entry:
        fields = orjson.loads(raw)
        topic, partition, offset, timestamp, key, value = fields["source"]
        source = SourceRecord(topic, partition, offset, timestamp, _unb64(key), _unb64(value))
        return cls(source, fields["since"], _unb64(fields["plan"]), fields["copies"])


@dataclass(slots=True)
class Queue:
    """One user's queue: the sequence numbers and digests of the waiting records, the head's
    failed tries, and the digests of records applied lately with the time of each."""

    next_seq: int = 0
    waiting: list[tuple[int, str]] = field(default_factory=list)
    failing: Failing | None = None
    applied: dict[str, float] = field(default_factory=dict)

    def encode(self) -> bytes:
        failing = [self.failing.attempts, self.failing.since] if self.failing else None
        return orjson.dumps(
            {
                "next": self.next_seq,
                "waiting": self.waiting,
                "failing": failing,
                "applied": self.applied,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> Queue:
        fields: dict[str, Any] = orjson.loads(raw)
        failing = fields["failing"]
        return cls(
            fields["next"],
            [(int(seq), str(d)) for seq, d in fields["waiting"]],
            Failing(int(failing[0]), float(failing[1])) if failing else None,
            {str(d): float(at) for d, at in fields["applied"].items()},
        )


@dataclass(slots=True)
class Outcomes:
    """What became of the records one call handled, by outcome (metric label values)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1


class UserOrder:
    """The queue of one (tenant, user) in ``table``: ``owner`` is the stage's record key."""

    def __init__(self, table: Table, owner: bytes, *, now: float, remember: float) -> None:
        self.table = table
        self.owner = owner
        self.now = now
        self.remember = remember
        raw = table.get(owner)
        self.queue = Queue.decode(raw) if raw is not None else Queue()
        # Applied records are remembered for a while only; a table entry per user forever
        # would grow with every user who ever met an outage.
        self.queue.applied = {d: at for d, at in self.queue.applied.items() if now - at < remember}

    def _key(self, seq: int) -> bytes:
        return self.owner + b"\x00" + str(seq).encode()

    def head(self) -> Entry | None:
        if not self.queue.waiting:
            return None
        raw = self.table.get(self._key(self.queue.waiting[0][0]))
        return Entry.decode(raw) if raw is not None else None

    def _put(self, seq: int, entry: Entry) -> None:
        self.table[self._key(seq)] = entry.encode()

    def save(self) -> None:
        q = self.queue
        if q.waiting or q.applied:
            self.table[self.owner] = q.encode()
        elif self.owner in self.table:
            del self.table[self.owner]

    def admit(self, source: SourceRecord) -> Admission:
        """Queue the record unless it is queued or applied already; say what to do with it."""
        digest = digest_of(source.value)
        waiting = [d for _, d in self.queue.waiting]
        if waiting and waiting[0] == digest:
            return Admission.HEAD
        if digest in waiting or digest in self.queue.applied:
            return Admission.KNOWN
        seq = self.queue.next_seq
        self.queue.next_seq += 1
        self.queue.waiting.append((seq, digest))
        self._put(seq, Entry(source, self.now))
        self.save()
        return Admission.HEAD if len(self.queue.waiting) == 1 else Admission.QUEUED

    async def keep_plan(self, entry: Entry, plan: bytes) -> None:
        entry.plan = plan
        self._put(self.queue.waiting[0][0], entry)

    def _pop(self, entry: Entry, applied: bool) -> None:
        seq, digest = self.queue.waiting.pop(0)
        del self.table[self._key(seq)]
        self.queue.failing = None
        if applied and entry.copies:
            self.queue.applied[digest] = self.now
        self.save()

    async def drain(
        self,
        apply: Apply,
        *,
        classify: Classify,
        retry: Retry,
        dead_letter: DeadLetter,
        resend: Resend,
        flush: Callable[[], Awaitable[None]],
    ) -> Outcomes:
        """Work on the head, then on each next one, until the queue is empty or its head
        waits out an outage (see the module docstring)."""
        out = Outcomes()
        for _ in range(MAX_APPLIED_PER_RECORD):
            entry = self.head()
            if entry is None:
                return out

            async def keep(plan: bytes, entry: Entry = entry) -> None:
                await self.keep_plan(entry, plan)
                await flush()  # the plan is in the table before any of it is written

            try:
                await apply(entry.source.value or b"", entry.plan, keep)
            except Exception as exc:
                reason = classify(exc)
                if reason is None:
                    before = self.queue.failing or Failing(0, entry.since)
                    entry = replace(entry, copies=True)
                    self._put(self.queue.waiting[0][0], entry)
                    if await retry(entry.source, before, exc):
                        self.queue.failing = Failing(before.attempts + 1, before.since)
                        self.save()
                        out.add("retried")
                        return out
                    reason = "retries_exhausted"
                    detail = (
                        f"The record failed {before.attempts + 1} times over "
                        f"{self.now - before.since:.0f} s since it joined its user's queue; "
                        f"last: {exc!r}."
                    )
                else:
                    detail = getattr(exc, "detail", None) or f"The stage failed: {exc!r}."
                await dead_letter(entry.source, reason, str(detail)[:500])
                self._pop(entry, applied=False)
                out.add("dead_lettered")
                continue
            self._pop(entry, applied=True)
            out.add("finished")
        entry = self.head()
        if entry is not None:
            self._put(self.queue.waiting[0][0], replace(entry, copies=True))
            await resend(entry.source)
        return out


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
