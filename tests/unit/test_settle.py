"""How a stage settles each record (``memstream.streams.stage.Settle``), run under Faust's test
context with no broker: finished, tried again later on the retry tier of its attempt, or
dead-lettered with its stage and reason; acknowledged only once that is durable."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy.exc import IntegrityError

from memstream.errors import InvalidEvent
from memstream.events.deadletter import SourceRecord
from memstream.failure.tiers import Failing, RetryRecord
from memstream.streams.app import app
from memstream.streams.stage import Settle
from memstream.streams.topics import dead_letter, retry_policy, retry_tiers
from memstream.testing import RunningStage, running_stage
from tests.support.waiting import eventually

STAGE = "probe"
handled: list[bytes] = []


def decode(raw: bytes | None) -> bytes:
    if raw == b"unreadable":
        raise ValueError("not a record of this stage")
    if raw == b"invalid":
        raise InvalidEvent("missing_field", "The record has no user_id.")
    return raw or b""


async def handle(value: bytes, source: SourceRecord) -> None:
    """Scripted by the record: an outage, a bug, a refusal by the database, or done."""
    if value == b"outage":
        raise ConnectionRefusedError("the database is down")
    if value == b"bug":
        raise KeyError("session")
    if value == b"refused":
        raise IntegrityError("INSERT ...", {}, Exception("Duplicate entry"))
    handled.append(value)


@app.agent(app.channel())
async def probe(stream: Any) -> None:
    await Settle(STAGE, stream).every_record(decode, handle)


@pytest.fixture
async def stage() -> AsyncIterator[RunningStage]:
    handled.clear()
    async with running_stage(probe) as started:
        yield started


def settled(outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "memstream_records_total", {"stage": STAGE, "outcome": outcome}
    )
    return value or 0.0


def letters(stage: RunningStage) -> list[dict[str, Any]]:
    return [record.json() for record in stage.producer.to(dead_letter)]


def waiting(stage: RunningStage, tier: int) -> list[RetryRecord]:
    return [RetryRecord.decode(r.value) for r in stage.producer.to(retry_tiers[tier])]


async def test_a_record_handled_is_acknowledged_and_nothing_else_sent(stage: RunningStage) -> None:
    before = settled("finished")
    event = await stage.put(b"fine")
    await stage.settled(event)
    assert handled == [b"fine"]
    assert stage.producer.sent == []
    assert settled("finished") == before + 1


@pytest.mark.parametrize(
    ("value", "reason", "detail"),
    [
        (b"unreadable", "invalid_payload", "The record cannot be read: ValueError("),
        (b"invalid", "missing_field", "The record has no user_id."),
        (b"bug", "stage_error", "The probe stage failed: KeyError('session')"),
        (b"refused", "rejected_by_database", "The database refused the record: IntegrityError("),
    ],
)
async def test_what_cannot_succeed_is_dead_lettered_at_once(
    stage: RunningStage, value: bytes, reason: str, detail: str
) -> None:
    before = settled("dead_lettered")
    event = await stage.put(value, key=b"conversation-1")
    await stage.settled(event)
    [letter] = letters(stage)
    assert (letter["stage"], letter["reason"]) == (STAGE, reason)
    assert letter["detail"].startswith(detail), letter["detail"]
    assert letter["payload"] == value.decode()  # the record byte for byte
    [dead] = stage.producer.to(dead_letter)
    assert dead.key == b"conversation-1"
    assert waiting(stage, 1) == [] and handled == []
    assert settled("dead_lettered") == before + 1


async def test_an_outage_puts_the_record_on_the_first_tier(stage: RunningStage) -> None:
    before = settled("retried")
    event = await stage.put(b"outage", key=b"conversation-1")
    await stage.settled(event)
    [retry] = waiting(stage, 1)
    assert (retry.stage, retry.key, retry.value) == (STAGE, b"conversation-1", b"outage")
    assert retry.failing.attempts == 1
    assert retry.not_before == pytest.approx(retry.failing.since + retry_policy.delay(1))
    assert "ConnectionRefusedError" in retry.error
    assert letters(stage) == []
    assert settled("retried") == before + 1


async def test_a_record_tried_again_goes_to_the_tier_of_its_attempt(stage: RunningStage) -> None:
    since = time.time() - 5
    event = await stage.put(b"outage", headers=Failing(2, since).headers())
    await stage.settled(event)
    [retry] = waiting(stage, retry_policy.tier_of(3))
    assert retry.failing == Failing(3, since)  # failing since its first try
    assert letters(stage) == []


async def test_a_record_failing_for_its_horizon_is_dead_lettered(stage: RunningStage) -> None:
    since = time.time() - retry_policy.horizon - 1
    event = await stage.put(b"outage", headers=Failing(4, since).headers())
    await stage.settled(event)
    [letter] = letters(stage)
    assert letter["reason"] == "retries_exhausted"
    assert letter["detail"].startswith("The probe stage failed 5 times over ")
    assert all(waiting(stage, tier) == [] for tier in retry_tiers)


async def test_a_dead_letter_is_sent_before_the_record_is_acknowledged(stage: RunningStage) -> None:
    stage.producer.down = 3  # the broker refuses the dead letter three times

    async def refused_twice() -> bool:
        return stage.producer.refused >= 2

    event = await stage.put(b"bug")
    await eventually(refused_twice, within=10, what="the dead letter refused")
    assert not event.message.acked
    await stage.settled(event)
    assert stage.producer.refused == 3
    assert [letter["reason"] for letter in letters(stage)] == ["stage_error"]


async def test_each_record_is_settled_on_its_own(stage: RunningStage) -> None:
    events = [await stage.put(value) for value in (b"one", b"bug", b"outage", b"two")]
    await stage.settled(*events)
    assert handled == [b"one", b"two"]
    assert [letter["reason"] for letter in letters(stage)] == ["stage_error"]
    assert [retry.value for retry in waiting(stage, 1)] == [b"outage"]
