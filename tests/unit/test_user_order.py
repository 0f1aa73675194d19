"""Per-user serial order (memstream.longterm.user_queue) over a plain dict standing in for the Faust
table: who is applied when, what waits, what is retried, dead-lettered or remembered."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from memstream.errors import ProviderUnavailable
from memstream.events.deadletter import SourceRecord
from memstream.failure.classify import failure_reason
from memstream.failure.tiers import Failing
from memstream.longterm.user_queue import MAX_APPLIED_PER_RECORD, Admission, Outcomes, UserOrder

OWNER = b'["t1","u1"]'
HORIZON = 600.0


def record(name: str, offset: int = 0) -> SourceRecord:
    return SourceRecord("memory.lt-conflict", 0, offset, 1.0, OWNER, name.encode())


@dataclass
class Stage:
    """The conflict stage around one user's queue: what it applied, retried, dead-lettered."""

    table: dict[bytes, bytes] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)  # records whose persist meets an outage
    broken: set[str] = field(default_factory=set)  # records that fail for good
    planned: list[str] = field(default_factory=list)
    applied: list[tuple[str, str]] = field(default_factory=list)  # (record, the plan applied)
    retried: list[tuple[str, Failing]] = field(default_factory=list)
    letters: list[tuple[str, str]] = field(default_factory=list)
    resent: list[str] = field(default_factory=list)
    flushes: int = 0
    horizon_spent: bool = False

    async def apply(
        self, value: bytes, kept: bytes | None, keep: Callable[[bytes], Awaitable[None]]
    ) -> None:
        name = value.decode()
        if name in self.broken:
            raise ValueError("no such provider call")
        if kept is None:
            self.planned.append(name)
            kept = f"plan of {name} #{len(self.planned)}".encode()
            await keep(kept)
        if name in self.down:
            raise ProviderUnavailable("the provider is down")
        self.applied.append((name, kept.decode()))

    async def retry(self, source: SourceRecord, before: Failing, exc: Exception) -> bool:
        if self.horizon_spent:
            return False
        self.retried.append(((source.value or b"").decode(), before))
        return True

    async def dead_letter(self, source: SourceRecord, reason: str, detail: str) -> None:
        self.letters.append(((source.value or b"").decode(), reason))

    async def resend(self, source: SourceRecord) -> None:
        self.resent.append((source.value or b"").decode())

    async def flush(self) -> None:
        self.flushes += 1

    async def handle(self, source: SourceRecord, now: float = 1000.0) -> Outcomes:
        order = UserOrder(self.table, OWNER, now=now, remember=HORIZON)
        admission = order.admit(source)
        if admission is not Admission.HEAD:
            return Outcomes({admission.value: 1})
        return await order.drain(
            self.apply,
            classify=failure_reason,
            retry=self.retry,
            dead_letter=self.dead_letter,
            resend=self.resend,
            flush=self.flush,
        )


async def test_without_failures_each_record_is_applied_at_once_and_nothing_stays():
    stage = Stage()
    assert (await stage.handle(record("s1"))).counts == {"finished": 1}
    assert (await stage.handle(record("s2"))).counts == {"finished": 1}
    assert [name for name, _ in stage.applied] == ["s1", "s2"]
    assert stage.flushes == 2  # each plan was in the table before it was applied
    assert stage.table == {}


async def test_a_record_behind_one_waiting_out_an_outage_waits_for_it():
    stage = Stage(down={"s1"})
    assert (await stage.handle(record("s1"), now=1000)).counts == {"retried": 1}
    assert stage.retried == [("s1", Failing(0, 1000))]
    # The user's next session arrives while the first waits: it is held, not applied.
    assert (await stage.handle(record("s2"), now=1001)).counts == {"queued": 1}
    assert stage.applied == []

    # The outage ends; the first comes back from its retry tier: both apply, in order, and
    # the first with the plan it made before (never planned twice).
    stage.down.clear()
    assert (await stage.handle(record("s1"), now=1002)).counts == {"finished": 2}
    assert stage.applied == [("s1", "plan of s1 #1"), ("s2", "plan of s2 #2")]
    assert stage.planned == ["s1", "s2"]


async def test_a_second_failure_counts_from_when_the_record_joined():
    stage = Stage(down={"s1"})
    await stage.handle(record("s1"), now=1000)
    await stage.handle(record("s1"), now=1001)
    assert stage.retried == [("s1", Failing(0, 1000)), ("s1", Failing(1, 1000))]


async def test_a_copy_arriving_after_its_record_was_applied_is_not_applied_again():
    stage = Stage(down={"s1"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    stage.down.clear()
    await stage.handle(record("s1"))
    # A second copy of s1 (sent back twice after a crash) comes back after s2 was applied.
    assert (await stage.handle(record("s1"))).counts == {"known": 1}
    assert [name for name, _ in stage.applied] == ["s1", "s2"]
    # It is forgotten once no copy can come back any more.
    later = UserOrder(stage.table, OWNER, now=1000 + HORIZON + 1, remember=HORIZON)
    later.save()
    assert stage.table == {}


async def test_a_record_that_fails_for_good_is_dead_lettered_and_the_next_goes_on():
    stage = Stage(down={"s1"}, broken=set())
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    await stage.handle(record("s3"))
    stage.down.clear()
    stage.broken.add("s2")
    assert (await stage.handle(record("s1"))).counts == {"finished": 2, "dead_lettered": 1}
    assert stage.letters == [("s2", "stage_error")]
    assert [name for name, _ in stage.applied] == ["s1", "s3"]


async def test_a_head_past_its_horizon_is_dead_lettered_and_the_next_is_tried():
    stage = Stage(down={"s1", "s2"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    stage.horizon_spent = True
    stage.down = {"s1"}
    assert (await stage.handle(record("s1"))).counts == {"dead_lettered": 1, "finished": 1}
    assert stage.letters == [("s1", "retries_exhausted")]
    assert [name for name, _ in stage.applied] == ["s2"]
    # Sent back by a redrive, it joins the end of the queue and is applied.
    stage.down.clear()
    assert (await stage.handle(record("s1"))).counts == {"finished": 1}
    assert [name for name, _ in stage.applied] == ["s2", "s1"]


async def test_a_redelivered_record_still_queued_is_not_queued_twice():
    stage = Stage(down={"s1"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    assert (await stage.handle(record("s2"))).counts == {"known": 1}
    stage.down.clear()
    await stage.handle(record("s1"))
    assert [name for name, _ in stage.applied] == ["s1", "s2"]


async def test_a_long_queue_goes_on_from_a_copy_of_its_head():
    waiting = MAX_APPLIED_PER_RECORD + 50
    stage = Stage(down={"s0"})
    for i in range(waiting):
        await stage.handle(record(f"s{i}"))
    stage.down.clear()
    first = await stage.handle(record("s0"))
    assert first.counts == {"finished": MAX_APPLIED_PER_RECORD}
    head = f"s{MAX_APPLIED_PER_RECORD}"
    assert stage.resent == [head]
    assert (await stage.handle(record(head))).counts == {"finished": 50}
    assert [name for name, _ in stage.applied] == [f"s{i}" for i in range(waiting)]
