"""The dedupe stage's agent under Faust's test context, with no broker: one session's
duplicate candidates go, the rest is handed to the conflict stage keyed by its user."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from memstream.agents.dedupe import dedupe
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import (
    Session,
    arrival_of,
    candidates_of,
    dumps,
    loads,
    session_of,
)
from memstream.longterm.user_queue import Arrival
from memstream.streams.topics import dead_letter, lt_conflict
from memstream.testing import RunningStage, running_stage

SESSION = Session("t1", "user-1", "agent-1", "c1", "end-c1")


def candidate(content: str, event: str, importance: int = 6) -> Candidate:
    return Candidate(content, "text_mem", "user", importance, "personal_fact", (event,))


@pytest.fixture
async def stage() -> AsyncIterator[RunningStage]:
    async with running_stage(dedupe) as started:
        yield started


async def test_duplicates_go_and_the_rest_goes_on_keyed_by_user(stage: RunningStage) -> None:
    proposed = [
        candidate("The user plays the cello", "c1-0"),
        candidate("The user plays the cello", "c1-2", importance=8),
        candidate("The user lives in Lisbon", "c1-4"),
    ]
    event = await stage.put(dumps(session=SESSION, candidates=proposed), key=b"c1")
    await stage.settled(event)
    [handed] = stage.producer.to(lt_conflict)
    assert handed.key == orjson.dumps(["t1", "user-1"])  # by (tenant, user) from here on
    record = loads(handed.value or b"")
    assert session_of(record) == SESSION
    kept = candidates_of(record)
    assert [c.content for c in kept] == ["The user plays the cello", "The user lives in Lisbon"]
    assert kept[0].importance == 8 and kept[0].source_event_ids == ("c1-0", "c1-2")
    assert stage.producer.to(dead_letter) == []


async def test_a_session_without_candidates_releases_its_place_in_its_users_order(
    stage: RunningStage,
) -> None:
    event = await stage.put(dumps(session=SESSION, candidates=[], at=10.0))
    await stage.settled(event)
    [handed] = stage.producer.sent
    assert handed.key == orjson.dumps(["t1", "user-1"])
    assert arrival_of(loads(handed.value or b"")) == Arrival("release", "end-c1")


async def test_the_time_the_session_ended_goes_on_with_its_candidates(stage: RunningStage) -> None:
    proposed = [candidate("The user lives in Lisbon", "c1-0")]
    event = await stage.put(dumps(session=SESSION, candidates=proposed, at=10.0))
    await stage.settled(event)
    [handed] = stage.producer.to(lt_conflict)
    assert arrival_of(loads(handed.value or b"")) == Arrival("record", "end-c1", 10.0)


async def test_a_record_it_cannot_read_is_dead_lettered(stage: RunningStage) -> None:
    event = await stage.put(b'{"session": 1}')
    await stage.settled(event)
    assert stage.producer.to(lt_conflict) == []  # no session read: none to release
    [letter] = [sent.json() for sent in stage.producer.to(dead_letter)]
    assert (letter["stage"], letter["reason"]) == ("dedupe", "invalid_payload")
    assert letter["payload"] == '{"session": 1}'


async def test_a_session_dead_lettered_here_releases_its_place_in_its_users_order(
    stage: RunningStage,
) -> None:
    session = orjson.loads(dumps(session=SESSION))["session"]
    event = await stage.put(orjson.dumps({"session": session, "candidates": "none"}))
    await stage.settled(event)
    [letter] = [sent.json() for sent in stage.producer.to(dead_letter)]
    assert letter["reason"] == "invalid_payload"
    [released] = stage.producer.to(lt_conflict)
    assert arrival_of(loads(released.value or b"")) == Arrival("release", "end-c1")
    assert letter["source"]["topic"] == dedupe.channel.get_topic_name()  # type: ignore[attr-defined]
