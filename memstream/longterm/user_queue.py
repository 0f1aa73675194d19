"""Per-user serial order of the long-term chain's last step: a user's sessions are applied in
the order they ended, one after the other, each planned only once the one before is applied
(docs/design/user-order.md: placeholders, releases, wakes, copies)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson

from memstream.events.deadletter import SourceRecord
from memstream.failure.tiers import Failing

MAX_APPLIED_PER_RECORD = 100
"""Records applied while handling one: the rest of a long queue is handled on a copy of its
head sent back to the stage, so that no single record holds a rebalance up for long."""
RELEASE_GRACE_SECONDS = 60.0
"""How long a placeholder still holds its user's later sessions once released for having nothing
new: a session end read again (a redelivery after a crash, a copy published twice) finds the
messages marked by its first reading, whose candidates may still be on their way through the
judge (an LLM call included)."""
WAKE_OVERDUE_SECONDS = 60.0
"""A wake this late is taken for lost and asked for again by the next record of the user."""

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
Wake = Callable[[float], Awaitable[None]]
"""Have a wake for the given time (epoch seconds) come back at it or before."""
Kind = Literal["record", "placeholder", "release", "wake"]


def digest_of(value: bytes | None) -> str:
    """A record's identity in its user's queue: the same value is the same record."""
    return hashlib.sha256(value or b"").hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Arrival:
    """What a record of the stage's input means for its user's queue: a session's candidates
    (``record``), the announcement of a session on its way, its release, or a wake."""

    kind: Kind
    session: str = ""  # the session end's event id
    at: float | None = None  # when the session ended: its place among the user's sessions
    until: float | None = None  # a placeholder's end, the time a wake was asked for
    soft: bool = False  # a release that an earlier reading's candidates may still overtake


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
class Slot:
    """A place in a user's queue: a record (its digest) or a placeholder (no digest yet)."""

    seq: int
    digest: str | None
    session: str = ""
    at: float | None = None
    until: float | None = None  # a placeholder is dropped then

    def encode(self) -> list[Any]:
        return [self.seq, self.digest, self.session, self.at, self.until]

    @classmethod
    def decode(cls, raw: list[Any]) -> Slot:
        # Queues written before placeholders existed hold [seq, digest] pairs.
        seq, digest, session, at, until = [*raw, "", None, None][:5]
        return cls(int(seq), None if digest is None else str(digest), str(session), at, until)


@dataclass(slots=True)
class Queue:
    """One user's queue: its slots in order, the head's failed tries, the digests of records
    applied lately and the sessions they were of, with the time of each, and the time the wake
    on its way was asked for."""

    next_seq: int = 0
    waiting: list[Slot] = field(default_factory=list)
    failing: Failing | None = None
    applied: dict[str, float] = field(default_factory=dict)
    wake: float | None = None
    sessions: dict[str, float] = field(default_factory=dict)

    def encode(self) -> bytes:
        failing = [self.failing.attempts, self.failing.since] if self.failing else None
        return orjson.dumps(
            {
                "next": self.next_seq,
                "waiting": [slot.encode() for slot in self.waiting],
                "failing": failing,
                "applied": self.applied,
                "wake": self.wake,
                "sessions": self.sessions,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> Queue:
        fields: dict[str, Any] = orjson.loads(raw)
        failing = fields["failing"]
        return cls(
            fields["next"],
            [Slot.decode(slot) for slot in fields["waiting"]],
            Failing(int(failing[0]), float(failing[1])) if failing else None,
            {str(d): float(at) for d, at in fields["applied"].items()},
            fields.get("wake"),
            {str(s): float(at) for s, at in fields.get("sessions", {}).items()},
        )


@dataclass(slots=True)
class Outcomes:
    """What became of the records one call handled, by outcome (metric label values), and
    what happened to the user's order (``order``: placeholders announced, filled, released,
    dropped; records that waited for an earlier session or came with no placeholder)."""

    counts: dict[str, int] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def saw(self, event: str) -> None:
        self.order[event] = self.order.get(event, 0) + 1


@dataclass(frozen=True, slots=True)
class Stage:
    """What the queue calls on: see the type aliases above."""

    apply: Apply
    classify: Classify
    retry: Retry
    dead_letter: DeadLetter
    resend: Resend
    flush: Callable[[], Awaitable[None]]
    wake: Wake


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
        self.queue.sessions = {
            s: at for s, at in self.queue.sessions.items() if now - at < remember
        }

    def _key(self, seq: int) -> bytes:
        return self.owner + b"\x00" + str(seq).encode()

    def head(self) -> Entry | None:
        """The head's record; None when the queue is empty or its head is a placeholder."""
        if not self.queue.waiting or self.queue.waiting[0].digest is None:
            return None
        raw = self.table.get(self._key(self.queue.waiting[0].seq))
        return Entry.decode(raw) if raw is not None else None

    def _put(self, seq: int, entry: Entry) -> None:
        self.table[self._key(seq)] = entry.encode()

    def save(self) -> None:
        q = self.queue
        if q.waiting or q.applied or q.sessions:
            self.table[self.owner] = q.encode()
        elif self.owner in self.table:
            del self.table[self.owner]

    async def settle(self, arrival: Arrival, source: SourceRecord, stage: Stage) -> Outcomes:
        """Take one record of the stage's input into the queue, then work on what is due."""
        out = Outcomes()
        self._expire(out)
        copy_of_head = self._take(arrival, source, out)
        head = self.head()
        # Worked on now: the head's own copy back, or a head no copy of it will bring back.
        if head is not None and (copy_of_head or not (self.queue.failing or head.copies)):
            await self.drain(stage, out)
        self.save()  # before the wake: a failure to send it leaves the queue as taken
        if await self._arm(stage.wake, out):
            self.save()
        return out

    def _expire(self, out: Outcomes) -> None:
        """Drop the placeholders past their end: that session comes too late or never."""
        kept = [s for s in self.queue.waiting if s.digest is not None or (s.until or 0) > self.now]
        for _ in range(len(self.queue.waiting) - len(kept)):
            out.saw("expired")
        self.queue.waiting = kept

    def _placeholder(self, session: str) -> Slot | None:
        return next(
            (s for s in self.queue.waiting if s.digest is None and s.session == session), None
        )

    def _place(self, slot: Slot) -> None:
        """Put ``slot`` after every slot of an earlier or unknown time and after a head already
        tried: an older session goes first while neither has been worked on."""
        waiting = self.queue.waiting
        head = self.head()
        started = head is not None and bool(self.queue.failing or head.plan or head.copies)
        floor = 1 if started else 0
        pos = len(waiting)
        if slot.at is not None:
            while pos > floor and (at := waiting[pos - 1].at) is not None and at > slot.at:
                pos -= 1
        waiting.insert(pos, slot)

    def _new_slot(self, digest: str | None, arrival: Arrival) -> Slot:
        seq = self.queue.next_seq
        self.queue.next_seq += 1
        until = arrival.until if digest is None else None
        return Slot(seq, digest, arrival.session, arrival.at, until)

    def _take(self, arrival: Arrival, source: SourceRecord, out: Outcomes) -> bool:
        """Apply the arrival to the queue; True when it is a copy of the head's record."""
        waiting = self.queue.waiting
        if arrival.kind == "wake":
            if self.queue.wake == arrival.until:
                self.queue.wake = None
            out.add("finished")
            return False
        if arrival.kind == "release":
            slot = self._placeholder(arrival.session)
            if slot is not None and arrival.soft:
                # Kept a while for candidates of an earlier reading; dropped after, as expired.
                slot.until = min(slot.until or self.now, self.now + RELEASE_GRACE_SECONDS)
                out.saw("released")
            elif slot is not None:
                waiting.remove(slot)
                out.saw("released")
            out.add("finished")
            return False
        if arrival.kind == "placeholder":
            out.add("finished")
            if any(s.session == arrival.session for s in waiting):
                return False  # announced again (a redelivery, a retry): kept once
            if arrival.session in self.queue.sessions:
                return False  # announced again once applied: nothing of it is on its way
            if arrival.until is not None and arrival.until <= self.now:
                out.saw("expired")
                return False
            self._place(self._new_slot(None, arrival))
            out.saw("announced")
            return False
        digest = digest_of(source.value)
        if waiting and waiting[0].digest == digest:
            return True
        done = digest in self.queue.applied or arrival.session in self.queue.sessions
        # A session read twice upstream may be judged twice, its candidates not the same.
        queued = any(
            s.digest == digest or (arrival.session and s.session == arrival.session and s.digest)
            for s in waiting
        )
        if done or queued:
            out.add("finished")  # queued already, or applied already
            return False
        slot = self._placeholder(arrival.session) if arrival.session else None
        if slot is not None:
            slot.digest, slot.until = digest, None
            out.saw("filled")
        else:
            slot = self._new_slot(digest, arrival)
            self._place(slot)
            out.saw("unannounced")
        self._put(slot.seq, Entry(source, self.now))
        if waiting[0] is not slot:
            out.add("held")
            if waiting[0].digest is None:
                out.saw("waited")
        return False

    async def _arm(self, wake: Wake, out: Outcomes) -> bool:
        """Have a wake come back for an unfilled placeholder that records wait behind; True
        when one was asked for."""
        waiting, pending = self.queue.waiting, self.queue.wake
        if len(waiting) < 2 or waiting[0].digest is not None or waiting[0].until is None:
            return False
        end = waiting[0].until
        # One on its way will do, unless it was for a later end or is long overdue (lost).
        if pending is not None and pending <= end and pending + WAKE_OVERDUE_SECONDS > self.now:
            return False
        await wake(end)
        self.queue.wake = end
        out.saw("wake")
        return True

    def waiting_state(self) -> str | None:
        """Why later records of the user wait, if they do: ``blocked`` on a placeholder not
        filled yet, ``retrying`` while the head waits out an outage."""
        waiting = self.queue.waiting
        if len(waiting) < 2:
            return None
        if waiting[0].digest is None:
            return "blocked"
        return "retrying" if self.queue.failing else None

    async def keep_plan(self, entry: Entry, plan: bytes) -> None:
        entry.plan = plan
        self._put(self.queue.waiting[0].seq, entry)

    def _pop(self, entry: Entry, applied: bool) -> None:
        slot = self.queue.waiting.pop(0)
        del self.table[self._key(slot.seq)]
        self.queue.failing = None
        if applied and slot.digest is not None:
            self.queue.applied[slot.digest] = self.now
        if applied and slot.session:
            self.queue.sessions[slot.session] = self.now
        self.save()

    async def drain(self, stage: Stage, out: Outcomes | None = None) -> Outcomes:
        """Work on the head, then on each next one, until the queue is empty, its head is a
        placeholder or it waits out an outage (see the module docstring)."""
        out = out if out is not None else Outcomes()
        for _ in range(MAX_APPLIED_PER_RECORD):
            entry = self.head()
            if entry is None:
                return out

            async def keep(plan: bytes, entry: Entry = entry) -> None:
                await self.keep_plan(entry, plan)
                await stage.flush()  # the plan is in the table before any of it is written

            try:
                await stage.apply(entry.source.value or b"", entry.plan, keep)
            except Exception as exc:
                reason = stage.classify(exc)
                if reason is None:
                    before = self.queue.failing or Failing(0, entry.since)
                    entry = replace(entry, copies=True)
                    self._put(self.queue.waiting[0].seq, entry)
                    if await stage.retry(entry.source, before, exc):
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
                await stage.dead_letter(entry.source, reason, str(detail)[:500])
                self._pop(entry, applied=False)
                out.add("dead_lettered")
                continue
            self._pop(entry, applied=True)
            out.add("finished")
        entry = self.head()
        if entry is not None:
            self._put(self.queue.waiting[0].seq, replace(entry, copies=True))
            await stage.resend(entry.source)
        return out


class Waiting:
    """The users whose later records wait (``UserOrder.waiting_state``) among the partitions a
    worker holds, as of the last record of each it handled."""

    STATES = ("blocked", "retrying")

    def __init__(self) -> None:
        self.users: dict[bytes, tuple[int, str]] = {}

    def update(
        self, owner: bytes, partition: int, state: str | None, held: Collection[int]
    ) -> dict[str, int]:
        """Record one user's state; answers how many users are in each state now, the users of
        partitions no longer ``held`` left out (their new owner counts them)."""
        if state is None:
            self.users.pop(owner, None)
        else:
            self.users[owner] = (partition, state)
        self.users = {o: found for o, found in self.users.items() if found[0] in held}
        counts = dict.fromkeys(self.STATES, 0)
        for _, found in self.users.values():
            counts[found] = counts.get(found, 0) + 1
        return counts


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
