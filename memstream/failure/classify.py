"""What a failure is: an outage worth waiting out, data the database refuses, or the reason a
record is dead-lettered."""

from __future__ import annotations

from aiokafka.errors import KafkaError, KafkaTimeoutError
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from memstream.errors import (
    HistoryBehind,
    InvalidEvent,
    ProviderUnavailable,
    Refused,
    ServiceUnavailable,
)

# Outages worth waiting for: the database, the network, timeouts.
TRANSIENT: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    OSError,
    ConnectionError,
    TimeoutError,
)
# Data the database itself refuses: retrying cannot help.
REFUSED: tuple[type[BaseException], ...] = (IntegrityError, DataError)
# What a stream stage waits out by trying a record again later.
OUTAGES: tuple[type[BaseException], ...] = (
    *TRANSIENT,
    HistoryBehind,
    ProviderUnavailable,
    ServiceUnavailable,
    KafkaTimeoutError,
)


def failure_reason(exc: BaseException) -> str | None:
    """What becomes of a record whose handling raised ``exc``: None to try it again later (an
    outage of the database, a provider, the broker or the network), else the dead-letter reason
    (the event's own, ``rejected_by_database``, or ``stage_error`` for anything unforeseen)."""
    if isinstance(exc, InvalidEvent):
        return exc.reason
    if isinstance(exc, (Refused, *REFUSED)):
        return "rejected_by_database"
    if isinstance(exc, OUTAGES) or (isinstance(exc, KafkaError) and exc.retriable):
        return None
    return "stage_error"
