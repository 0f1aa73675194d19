"""What the long-term stages tell the conflict stage's per-user queues
(``memstream.longterm.user_queue``) besides a session's candidates: a session on its way
(placeholder), a session that ends with nothing for it (release), and a wake for a queue that
waits on a placeholder. All go to ``lt-conflict`` keyed by the user, so each lands on the
partition of that user's candidates and is read in turn with them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import faust

from memstream import metrics, tracing
from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord
from memstream.failure.tiers import Failing, RetryRecord
from memstream.longterm.payloads import (
    Session,
    ended_at,
    loads,
    placeholder,
    release,
    session_of,
    wake,
)
from memstream.streams import delivery
from memstream.streams.topics import lt_conflict, retry_policy, retry_tiers
from memstream_client.contract.events import parse_session_end

Released = Callable[[SourceRecord], Awaitable[None]]


async def announce(events: Sequence[faust.EventT[Any]]) -> None:
    """Announce each session end in ``events`` to its user's queue, ordered by when it ended,
    before anything that may send it to a retry tier; one that cannot be read is announced
    by no one (it is dead-lettered). Dropped a retry horizon from now if never filled."""
    until = time.time() + retry_policy.horizon
    pending = []
    for event in events:
        try:
            ended = parse_session_end(event.message.value)
        except InvalidEvent:
            continue
        current = Session.of(ended)
        value = placeholder(current, ended_at(ended, event.message.timestamp), until)
        traced = list(tracing.continuing(event.message.headers))
        pending.append(await lt_conflict.send(key=current.owner_key, value=value, headers=traced))
    await asyncio.gather(*pending)
    metrics.SESSION_ORDER.labels("announced").inc(len(pending))


async def release_session(current: Session, why: str) -> None:
    """The session ends here with nothing for the conflict stage: later sessions go on."""
    await delivery.send_durably(lt_conflict, current.owner_key, release(current, why))


def released_when_dead_lettered(session: Callable[[bytes | None], Session]) -> Released:
    """What a stage does once it dead-lettered a record: release the session it belongs to
    (``session`` reads it from the record; one it cannot read was never announced)."""

    async def released(source: SourceRecord) -> None:
        try:
            current = session(source.value)
        except Exception:
            return
        await release_session(current, "dead_lettered")

    return released


def session_of_end(raw: bytes | None) -> Session:
    """The session of a ``session-ended`` value."""
    return Session.of(parse_session_end(raw))


def session_of_record(raw: bytes | None) -> Session:
    """The session of a long-term stage's record."""
    return session_of(loads(raw or b""))


async def wake_at(owner: bytes, when: float) -> None:
    """Have the conflict stage look at ``owner``'s queue again at about ``when``: a wake on the
    retry tier whose wait comes closest without passing it (the first, when even that one's
    does); the queue asks again for what is left when it comes early."""
    now = time.time()
    tiers = range(1, retry_policy.tiers + 1)
    tier = max((t for t in tiers if retry_policy.delay(t) <= when - now), default=1)
    due = now + retry_policy.delay(tier)
    record = RetryRecord(
        "conflict", lt_conflict.get_topic_name(), owner, wake(when), Failing(1, now), due,
        "a wake for a queue waiting on an earlier session",
    )  # fmt: skip
    await delivery.send_durably(retry_tiers[tier], owner, record.encode())
