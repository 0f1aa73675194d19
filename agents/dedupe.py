"""The dedupe stage: duplicates within one session's candidates, then repartition by user."""

from __future__ import annotations

from typing import Any

import faust

from memstream import metrics
from memstream.longterm.dedupe import dedupe as dedupe_candidates
from memstream.longterm.payloads import candidates_of, dumps, loads, session_of
from memstream.streams import shared
from memstream.streams.app import app
from memstream.streams.topics import lt_conflict, lt_dedupe

STAGE = "dedupe"


@app.agent(lt_dedupe)
async def dedupe(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        record = loads(event.message.value)
        current = session_of(record)
        candidates = dedupe_candidates(candidates_of(record))
        metrics.EVENTS.labels(STAGE, "candidates").inc(len(candidates))
        if not candidates:
            continue
        # Keyed by (tenant, user) from here on: two sessions of one user never race on a cube.
        await shared.send_durably(
            lt_conflict, current.owner_key, dumps(session=current, candidates=candidates)
        )
