"""The dedupe stage: duplicates within one session's candidates, then repartition by user."""

from __future__ import annotations

from typing import Any

import faust

from memstream import metrics
from memstream.events.deadletter import SourceRecord
from memstream.longterm.dedupe import dedupe as dedupe_candidates
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import Session, at_of, candidates_of, dumps, loads, session_of
from memstream.streams import delivery
from memstream.streams.app import app
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_conflict, lt_dedupe
from memstream.streams.user_queues import (
    release_session,
    released_when_dead_lettered,
    session_of_record,
)

STAGE = "dedupe"
Candidates = tuple[Session, list[Candidate], float | None]


def read(raw: bytes | None) -> Candidates:
    """A session, its candidate memories and when it ended (the dedupe and conflict stages'
    input)."""
    record = loads(raw or b"")
    return session_of(record), candidates_of(record), at_of(record)


async def handle(proposed: Candidates, source: SourceRecord) -> None:
    current, found, at = proposed
    # No forget check here (no IO, nothing written): the conflict stage drops the session.
    candidates = dedupe_candidates(found)
    metrics.EVENTS.labels(STAGE, "candidates").inc(len(candidates))
    if not candidates:
        await release_session(current, "nothing_judged")
        return
    # Keyed by (tenant, user) from here on: two sessions of one user never race on a cube.
    value = dumps(session=current, candidates=candidates, at=at)
    await delivery.send_durably(lt_conflict, current.owner_key, value)


@app.agent(lt_dedupe)
async def dedupe(stream: faust.StreamT[Any]) -> None:
    released = released_when_dead_lettered(session_of_record)
    await Settle(STAGE, stream, dead_lettered=released).every_record(read, handle)
