"""Waiting out a broker that is not ready yet: a new cluster whose internal topics do not
exist (no group coordinator until the offsets topic is created), a node that accepts
connections before it has registered, a restart.

Every command that talks to the broker (the worker's start, replay, redrive, dead-letters,
publish) runs its broker calls through :func:`patiently`: a failure the broker calls retriable,
or no answer at all, is tried again with capped, doubling pauses until
``MEMSTREAM_KAFKA_WAIT_SECONDS`` have passed; then it raises as it would have at once. A
secured broker that refuses the credentials or the TLS handshake looks like no answer to
aiokafka; that is asked once and raised at once as a ``ConfigurationError``: waiting cannot
fix a wrong password.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import (
    InvalidReplicationFactorError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)

from memstream.errors import ConfigurationError, ServiceUnavailable
from memstream.settings import BrokerSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_SECONDS = 0.2
LONGEST_PAUSE_SECONDS = 5.0


def not_ready(exc: BaseException) -> bool:
    """Whether ``exc`` says the broker is not ready (yet), rather than that the call is wrong."""
    if isinstance(exc, ServiceUnavailable | KafkaConnectionError | KafkaTimeoutError):
        return True
    # A node that answers before it has registered as a broker has no broker to place a
    # replica on.
    if isinstance(exc, InvalidReplicationFactorError):
        return True
    return isinstance(exc, KafkaError) and bool(exc.retriable)


async def patiently(
    settings: BrokerSettings,
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    within: float | None = None,
) -> T:
    """``call()``, tried again while the broker is not ready, for at most ``within`` seconds
    (the configured wait when None)."""
    wait = settings.kafka_wait_seconds if within is None else within
    deadline = time.monotonic() + wait
    pause = FIRST_PAUSE_SECONDS
    asked = False
    while True:
        try:
            return await call()
        except Exception as exc:
            if not asked and _unanswered(exc):
                asked = True
                await _raise_refusal(settings, what)
            if not not_ready(exc) or time.monotonic() + pause > deadline:
                raise
            log.warning("%s: the broker is not ready (%r); again in %.1f s", what, exc, pause)
        await asyncio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE_SECONDS)


def _unanswered(exc: BaseException) -> bool:
    return isinstance(exc, KafkaConnectionError) or isinstance(exc.__cause__, KafkaConnectionError)


async def _raise_refusal(settings: BrokerSettings, what: str) -> None:
    refusal = await settings.kafka_security.refusal(settings.kafka_bootstrap_servers)
    if refusal is not None:
        raise ConfigurationError(
            f"{what}: {refusal}; check MEMSTREAM_KAFKA_SECURITY_PROTOCOL, "
            "MEMSTREAM_KAFKA_SASL_* and MEMSTREAM_KAFKA_SSL_*"
        )
