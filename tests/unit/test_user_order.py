"""Per-user serial order (memstream.longterm.user_queue) over a plain dict standing in for the Faust
table: who is applied when, what waits, what is retried, dead-lettered or remembered, and the
placeholders that keep a user's sessions in the order they ended."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from memstream.errors import ProviderUnavailable
from memstream.events.deadletter import SourceRecord
from memstream.failure.classify import failure_reason
from memstream.failure.tiers import Failing
from memstream.longterm.payloads import Session, arrival_of, loads, placeholder, release, wake
from memstream.longterm.user_queue import (
    MAX_APPLIED_PER_RECORD,
    RELEASE_GRACE_SECONDS,
    WAKE_OVERDUE_SECONDS,
    Arrival,
    Outcomes,
    Queue,
    Stage,
    UserOrder,
    Waiting,
)

OWNER = b'["t1","u1"]'
HORIZON = 600.0


def record(name: str, at: float | None = None, offset: int = 0) -> SourceRecord:
    """The candidates of session ``name`` (its record's value is the name)."""
    value = orjson.dumps({"name": name, "at": at})
    return SourceRecord("memory.lt-conflict", 0, offset, 1.0, OWNER, value)


def name_of(source: SourceRecord) -> str:
    return str(orjson.loads(source.value or b"")["name"])


@dataclass
class Conflict:
    """The conflict stage around one user's queue: what it applied, retried, dead-lettered."""

    table: dict[bytes, bytes] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)  # records whose persist meets an outage
    broken: set[str] = field(default_factory=set)  # records that fail for good
    planned: list[str] = field(default_factory=list)
    applied: list[tuple[str, str]] = field(default_factory=list)  # (record, the plan applied)
    retried: list[tuple[str, Failing]] = field(default_factory=list)
    letters: list[tuple[str, str]] = field(default_factory=list)
    resent: list[str] = field(default_factory=list)
    wakes: list[float] = field(default_factory=list)  # when each wake asked for is due
    flushes: int = 0
    horizon_spent: bool = False

    async def apply(
        self, value: bytes, kept: bytes | None, keep: Callable[[bytes], Awaitable[None]]
    ) -> None:
        name = str(orjson.loads(value)["name"])
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
        self.retried.append((name_of(source), before))
        return True

    async def dead_letter(self, source: SourceRecord, reason: str, detail: str) -> None:
        self.letters.append((name_of(source), reason))

    async def resend(self, source: SourceRecord) -> None:
        self.resent.append(name_of(source))

    async def flush(self) -> None:
        self.flushes += 1

    async def wake(self, when: float) -> None:
        self.wakes.append(when)

    def stage(self) -> Stage:
        return Stage(
            self.apply,
            classify=failure_reason,
            retry=self.retry,
            dead_letter=self.dead_letter,
            resend=self.resend,
            flush=self.flush,
            wake=self.wake,
        )

    async def arrive(
        self, arrival: Arrival, source: SourceRecord | None = None, now: float = 1000.0
    ) -> Outcomes:
        order = UserOrder(self.table, OWNER, now=now, remember=HORIZON)
        return await order.settle(arrival, source or record(arrival.session), self.stage())

    async def handle(self, source: SourceRecord, now: float = 1000.0) -> Outcomes:
        """The candidates of a session (named by the record) arrive."""
        fields = orjson.loads(source.value or b"")
        arrival = Arrival("record", fields["name"], fields["at"])
        return await self.arrive(arrival, source, now)

    async def announce(self, name: str, at: float, now: float = 1000.0) -> Outcomes:
        return await self.arrive(Arrival("placeholder", name, at, now + HORIZON), now=now)

    async def release(self, name: str, now: float = 1000.0) -> Outcomes:
        return await self.arrive(Arrival("release", name), now=now)

    def order(self, now: float = 1000.0) -> UserOrder:
        return UserOrder(self.table, OWNER, now=now, remember=HORIZON)

    def names(self) -> list[str]:
        return [name for name, _ in self.applied]


def forgotten_after_the_horizon(stage: Conflict) -> bool:
    """Whether nothing waits and the user's queue is gone once no copy can come back."""
    nothing_waits = stage.order().queue.waiting == []
    stage.order(now=1000 + HORIZON + 1).save()
    return nothing_waits and stage.table == {}


async def test_without_failures_each_record_is_applied_at_once_and_nothing_stays():
    stage = Conflict()
    assert (await stage.handle(record("s1"))).counts == {"finished": 1}
    assert (await stage.handle(record("s2"))).counts == {"finished": 1}
    assert stage.names() == ["s1", "s2"]
    assert stage.flushes == 2  # each plan was in the table before it was applied
    assert forgotten_after_the_horizon(stage)


async def test_a_record_behind_one_waiting_out_an_outage_waits_for_it():
    stage = Conflict(down={"s1"})
    assert (await stage.handle(record("s1"), now=1000)).counts == {"retried": 1}
    assert stage.retried == [("s1", Failing(0, 1000))]
    # The user's next session arrives while the first waits: it is held, not applied.
    assert (await stage.handle(record("s2"), now=1001)).counts == {"held": 1}
    assert stage.applied == []
    assert stage.order().waiting_state() == "retrying"

    # The outage ends; the first comes back from its retry tier: both apply, in order, and
    # the first with the plan it made before (never planned twice).
    stage.down.clear()
    assert (await stage.handle(record("s1"), now=1002)).counts == {"finished": 2}
    assert stage.applied == [("s1", "plan of s1 #1"), ("s2", "plan of s2 #2")]
    assert stage.planned == ["s1", "s2"]


async def test_a_second_failure_counts_from_when_the_record_joined():
    stage = Conflict(down={"s1"})
    await stage.handle(record("s1"), now=1000)
    await stage.handle(record("s1"), now=1001)
    assert stage.retried == [("s1", Failing(0, 1000)), ("s1", Failing(1, 1000))]


async def test_a_copy_arriving_after_its_record_was_applied_is_not_applied_again():
    stage = Conflict(down={"s1"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    stage.down.clear()
    await stage.handle(record("s1"))
    # A second copy of s1 (sent back twice after a crash) comes back after s2 was applied.
    assert (await stage.handle(record("s1"))).counts == {"finished": 1}
    assert stage.names() == ["s1", "s2"]
    # It is forgotten once no copy can come back any more.
    stage.order(now=1000 + HORIZON + 1).save()
    assert stage.table == {}


async def test_a_record_that_fails_for_good_is_dead_lettered_and_the_next_goes_on():
    stage = Conflict(down={"s1"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    await stage.handle(record("s3"))
    stage.down.clear()
    stage.broken.add("s2")
    assert (await stage.handle(record("s1"))).counts == {"finished": 2, "dead_lettered": 1}
    assert stage.letters == [("s2", "stage_error")]
    assert stage.names() == ["s1", "s3"]


async def test_a_head_past_its_horizon_is_dead_lettered_and_the_next_is_tried():
    stage = Conflict(down={"s1", "s2"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    stage.horizon_spent = True
    stage.down = {"s1"}
    assert (await stage.handle(record("s1"))).counts == {"dead_lettered": 1, "finished": 1}
    assert stage.letters == [("s1", "retries_exhausted")]
    assert stage.names() == ["s2"]
    # Sent back by a redrive, it joins the queue again and is applied.
    stage.down.clear()
    assert (await stage.handle(record("s1"))).counts == {"finished": 1}
    assert stage.names() == ["s2", "s1"]


async def test_a_redelivered_record_still_queued_is_not_queued_twice():
    stage = Conflict(down={"s1"})
    await stage.handle(record("s1"))
    await stage.handle(record("s2"))
    assert (await stage.handle(record("s2"))).counts == {"finished": 1}
    stage.down.clear()
    await stage.handle(record("s1"))
    assert stage.names() == ["s1", "s2"]


async def test_a_long_queue_goes_on_from_a_copy_of_its_head():
    waiting = MAX_APPLIED_PER_RECORD + 50
    stage = Conflict(down={"s0"})
    for i in range(waiting):
        await stage.handle(record(f"s{i}"))
    stage.down.clear()
    first = await stage.handle(record("s0"))
    assert first.counts == {"finished": MAX_APPLIED_PER_RECORD}
    head = f"s{MAX_APPLIED_PER_RECORD}"
    assert stage.resent == [head]
    assert (await stage.handle(record(head))).counts == {"finished": 50}
    assert stage.names() == [f"s{i}" for i in range(waiting)]


async def test_a_later_session_waits_for_the_placeholder_of_an_earlier_one():
    stage = Conflict()
    assert (await stage.announce("s1", at=10)).order == {"announced": 1}
    await stage.announce("s2", at=20)
    # Session 1 waits on a retry tier before the conflict stage; session 2's candidates are here.
    held = await stage.handle(record("s2", at=20))
    assert held.counts == {"held": 1} and held.order["filled"] == 1 and held.order["waited"] == 1
    assert stage.applied == []
    assert stage.order().waiting_state() == "blocked"
    # Session 1's candidates come: both are applied, the older first.
    done = await stage.handle(record("s1", at=10))
    assert done.counts == {"finished": 2} and done.order == {"filled": 1}
    assert stage.names() == ["s1", "s2"]
    assert forgotten_after_the_horizon(stage)


async def test_placeholders_take_the_order_the_sessions_ended_in_not_the_order_they_came():
    stage = Conflict()
    # Session ends of two conversations, read from two partitions: the later one first.
    await stage.announce("s2", at=20)
    await stage.announce("s1", at=10)
    await stage.handle(record("s2", at=20))
    assert stage.applied == []
    await stage.handle(record("s1", at=10))
    assert stage.names() == ["s1", "s2"]


async def test_a_released_placeholder_lets_the_later_sessions_go_on():
    stage = Conflict()
    await stage.announce("s1", at=10)
    await stage.announce("s2", at=20)
    await stage.handle(record("s2", at=20))
    # Session 1 ended with nothing to apply (nothing new, or dead-lettered on its way).
    released = await stage.release("s1")
    assert released.order == {"released": 1} and released.counts == {"finished": 2}
    assert stage.names() == ["s2"]
    # A release of a session with no placeholder (announced by no one, or gone) changes nothing.
    assert (await stage.release("s9")).order == {}


async def test_a_release_for_nothing_new_holds_on_a_while_for_an_earlier_reading():
    stage = Conflict()
    await stage.announce("s1", at=10, now=1000)
    await stage.announce("s2", at=20, now=1000)
    await stage.handle(record("s2", at=20), now=1001)
    # Session 1 read again after a crash: its messages are marked, its first reading's
    # candidates still in the judge. The placeholder holds for the grace, not the horizon.
    soft = Arrival("release", "s1", soft=True)
    assert (await stage.arrive(soft, now=1002)).order == {"released": 1, "wake": 1}
    assert stage.applied == [] and stage.wakes[-1] == 1002 + RELEASE_GRACE_SECONDS
    await stage.handle(record("s1", at=10), now=1010)
    assert stage.names() == ["s1", "s2"]


async def test_a_release_for_nothing_new_lets_the_next_go_on_after_the_grace():
    stage = Conflict()
    await stage.announce("s1", at=10, now=1000)
    await stage.handle(record("s2", at=20), now=1001)
    await stage.arrive(Arrival("release", "s1", soft=True), now=1002)
    late = 1002 + RELEASE_GRACE_SECONDS
    done = await stage.arrive(Arrival("wake", until=late), now=late)
    assert done.order == {"expired": 1} and stage.names() == ["s2"]


async def test_a_release_never_takes_away_a_filled_placeholder():
    stage = Conflict(down={"s1"})
    await stage.announce("s1", at=10)
    await stage.announce("s2", at=20)
    await stage.handle(record("s1", at=10))  # filled, then waits out an outage
    await stage.handle(record("s2", at=20))
    # The session stage read session 1 again after a crash: its messages are marked by now.
    assert (await stage.release("s1")).order == {}
    stage.down.clear()
    await stage.handle(record("s1", at=10))
    assert stage.names() == ["s1", "s2"]


async def test_a_placeholder_announced_twice_is_kept_once():
    stage = Conflict()
    await stage.announce("s1", at=10)
    assert (await stage.announce("s1", at=10)).order == {}
    await stage.handle(record("s1", at=10))
    assert stage.names() == ["s1"]
    assert forgotten_after_the_horizon(stage)


async def test_a_session_read_again_upstream_after_it_was_applied_changes_nothing():
    """A stage before the conflict stage read session 1 again (a crash or a rebalance before
    its offset was committed): its end is announced again and its candidates sent again, after
    session 2 was applied. Neither holds anything back, and session 1 is not applied again
    after session 2 (its older fact would be stored again beside the newer one)."""
    stage = Conflict()
    await stage.announce("s1", at=10)
    await stage.handle(record("s1", at=10))
    await stage.announce("s2", at=20)
    await stage.handle(record("s2", at=20))
    assert stage.names() == ["s1", "s2"]
    assert (await stage.announce("s1", at=10)).order == {}
    assert stage.order().waiting_state() is None and stage.order().queue.waiting == []
    assert (await stage.handle(record("s1", at=10))).counts == {"finished": 1}
    # Session 3 is applied at once, not held behind session 1 announced again.
    await stage.announce("s3", at=30)
    assert (await stage.handle(record("s3", at=30))).counts == {"finished": 1}
    assert stage.names() == ["s1", "s2", "s3"]
    assert forgotten_after_the_horizon(stage)


async def test_a_lost_session_blocks_its_user_until_the_horizon_at_most():
    stage = Conflict()
    await stage.announce("s1", at=10, now=1000)
    await stage.handle(record("s2", at=20), now=1001)
    # Records wait behind it: a wake is asked for at the placeholder's end, once.
    assert stage.wakes == [1000 + HORIZON]
    await stage.handle(record("s3", at=30), now=1002)
    assert stage.wakes == [1000 + HORIZON]
    # A wake that comes too early (a tier's wait is shorter than the horizon) asks again.
    await stage.arrive(Arrival("wake", until=1000 + HORIZON), now=1000 + HORIZON - 1)
    assert stage.wakes == [1000 + HORIZON] * 2 and stage.applied == []
    done = await stage.arrive(Arrival("wake", until=1000 + HORIZON), now=1000 + HORIZON)
    assert done.order == {"expired": 1} and stage.names() == ["s2", "s3"]
    # Announced again past its end (a dead letter of it sent back late): it blocks no one.
    late = Arrival("placeholder", "s1", 10, until=1000 + HORIZON)
    assert (await stage.arrive(late, now=1000 + HORIZON + 1)).order == {"expired": 1}
    await stage.handle(record("s4", at=40), now=1000 + HORIZON + 1)
    assert stage.names() == ["s2", "s3", "s4"]


async def test_a_wake_taken_for_lost_is_asked_for_again_by_the_next_record():
    stage = Conflict()
    await stage.announce("s1", at=10, now=1000)
    await stage.handle(record("s2", at=20), now=1001)
    await stage.handle(record("s3", at=30), now=1000 + HORIZON + WAKE_OVERDUE_SECONDS - 1)
    assert len(stage.wakes) == 1
    # A wake that never came: the placeholder is past its end, the next record drops it.
    await stage.handle(record("s4", at=40), now=1000 + HORIZON + WAKE_OVERDUE_SECONDS + 1)
    assert stage.names() == ["s2", "s3", "s4"]


async def test_a_record_with_no_placeholder_takes_its_place_by_when_its_session_ended():
    stage = Conflict()
    await stage.announce("s2", at=20)
    # Session 1's placeholder went (released by a redelivery) before its candidates came.
    unannounced = await stage.handle(record("s1", at=10))
    assert unannounced.order == {"unannounced": 1} and stage.names() == ["s1"]
    # A record with no time (from a version that sent none) goes last.
    assert (await stage.handle(record("old"))).counts == {"held": 1}
    await stage.handle(record("s2", at=20))
    assert stage.names() == ["s1", "s2", "old"]


async def test_an_earlier_session_never_goes_ahead_of_a_head_already_tried():
    stage = Conflict(down={"s2"})
    await stage.handle(record("s2", at=20))  # planned, then an outage
    await stage.announce("s1", at=10)
    await stage.handle(record("s1", at=10))
    stage.down.clear()
    await stage.handle(record("s2", at=20))
    # Its kept plan was made without session 1: applied first, with that plan.
    assert stage.applied == [("s2", "plan of s2 #1"), ("s1", "plan of s1 #2")]


async def test_queues_written_before_placeholders_are_read_on():
    legacy = orjson.dumps(
        {"next": 2, "waiting": [[0, "abc"], [1, "def"]], "failing": [1, 5.0], "applied": {}}
    )
    queue = Queue.decode(legacy)
    assert [(s.seq, s.digest, s.at) for s in queue.waiting] == [(0, "abc", None), (1, "def", None)]
    assert queue.wake is None and Queue.decode(queue.encode()) == queue


def test_the_records_of_the_conflict_stage_say_what_they_mean_for_the_queue():
    session = Session("t1", "u1", "a1", "c1", "end-c1")
    value = loads(placeholder(session, 10.0, 700.0))
    assert arrival_of(value) == Arrival("placeholder", "end-c1", 10.0, 700.0)
    soft = Arrival("release", "end-c1", soft=True)
    assert arrival_of(loads(release(session, "nothing_new"))) == soft
    assert arrival_of(loads(release(session, "dead_lettered"))) == Arrival("release", "end-c1")
    assert arrival_of(loads(wake(700.0))) == Arrival("wake", until=700.0)
    candidates = {"session": value["session"], "candidates": [], "at": 10}
    assert arrival_of(candidates) == Arrival("record", "end-c1", 10.0)
    assert arrival_of({"session": value["session"], "candidates": []}).at is None


def test_waiting_users_are_counted_by_state_on_the_partitions_held():
    waiting = Waiting()
    assert waiting.update(b"u1", 0, "blocked", {0, 1}) == {"blocked": 1, "retrying": 0}
    assert waiting.update(b"u2", 1, "retrying", {0, 1}) == {"blocked": 1, "retrying": 1}
    # Partition 1 moved to another worker: its users are counted there.
    assert waiting.update(b"u1", 0, "blocked", {0}) == {"blocked": 1, "retrying": 0}
    assert waiting.update(b"u1", 0, None, {0}) == {"blocked": 0, "retrying": 0}
