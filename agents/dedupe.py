"""The dedupe stage: duplicates within one session's candidates, then repartition by user."""

from __future__ import annotations

from typing import Any

import faust

from memstream import metrics
from memstream.events.deadletter import SourceRecord
from memstream.longterm.dedupe import dedupe as dedupe_candidates
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import Session, candidates_of, dumps, loads, session_of
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.stage import Settle
from memstream.streams.topics import lt_conflict, lt_dedupe

STAGE = "dedupe"
Candidates = tuple[Session, list[Candidate]]


def read(raw: bytes | None) -> Candidates:
    """A session and its candidate memories (the dedupe and conflict stages' input)."""
    record = loads(raw or b"")
    return session_of(record), candidates_of(record)


async def handle(proposed: Candidates, source: SourceRecord) -> None:
    current, candidates = proposed[0], dedupe_candidates(proposed[1])
    metrics.EVENTS.labels(STAGE, "candidates").inc(len(candidates))
    if candidates:
        # Keyed by (tenant, user) from here on: two sessions of one user never race on a cube.
        await shared.send_durably(
            lt_conflict, current.owner_key, dumps(session=current, candidates=candidates)
        )


@app.agent(lt_dedupe)
async def dedupe(stream: faust.StreamT[Any]) -> None:
    await Settle(STAGE, stream).each(read, handle)
