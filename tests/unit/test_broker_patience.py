"""Waiting out a broker that is not ready: which errors are waited out, and for how long."""

from __future__ import annotations

import pytest
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    InvalidReplicationFactorError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)

from memstream.broker.patience import not_ready, patiently
from memstream.errors import ServiceUnavailable
from memstream.settings import Settings


def test_a_broker_not_ready_yet_is_told_from_a_call_it_refuses() -> None:
    assert not_ready(GroupCoordinatorNotAvailableError())
    assert not_ready(KafkaConnectionError())
    assert not_ready(ServiceUnavailable("no answer"))
    assert not_ready(InvalidReplicationFactorError())
    assert not not_ready(TopicAuthorizationFailedError())
    assert not not_ready(ValueError("bad"))


async def test_a_call_is_tried_again_until_the_broker_is_ready() -> None:
    failures = [GroupCoordinatorNotAvailableError(), KafkaConnectionError()]
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)
        return "done"

    assert await patiently(Settings(kafka_wait_seconds=30), "test", call) == "done"
    assert calls == 3


async def test_a_refused_call_raises_at_once_and_a_lasting_outage_after_the_wait() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise TopicAuthorizationFailedError()

    with pytest.raises(TopicAuthorizationFailedError):
        await patiently(Settings(kafka_wait_seconds=30), "test", refused)
    assert calls == 1

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise GroupCoordinatorNotAvailableError()

    calls = 0
    with pytest.raises(GroupCoordinatorNotAvailableError):
        await patiently(Settings(kafka_wait_seconds=30), "test", down, within=1.0)
    assert calls >= 2  # tried again, then given up once the next pause would end past the wait
