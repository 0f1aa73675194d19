"""What a failure is: an outage worth waiting out, data the database refuses, or the reason a
record is dead-lettered."""

from __future__ import annotations

from aiokafka.errors import KafkaError, KafkaTimeoutError
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from memstream.errors import InvalidEvent, Outage, Rejected

# The database's and the network's own outages (memstream's are each an ``Outage``).
TRANSIENT: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    OSError,
    ConnectionError,
    TimeoutError,
)
# Data the database itself refuses: retrying cannot help.
REFUSED: tuple[type[BaseException], ...] = (IntegrityError, DataError)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is worth waiting out: one of memstream's outages, or the database, the
    network or the broker not answering (the database refusing data is not)."""
    if isinstance(exc, REFUSED):
        return False
    if isinstance(exc, KafkaError):
        return exc.retriable or isinstance(exc, KafkaTimeoutError)
    return isinstance(exc, (Outage, *TRANSIENT))


def failure_reason(exc: BaseException) -> str | None:
    """What becomes of a record whose handling raised ``exc``: None to try it again later (an
    outage of the database, a provider, the broker or the network), else the dead-letter reason
    (the event's own, ``rejected_by_database``, or ``stage_error`` for anything unforeseen)."""
    if isinstance(exc, InvalidEvent):
        return exc.reason
    if isinstance(exc, (Rejected, *REFUSED)):
        return "rejected_by_database"
    return None if is_outage(exc) else "stage_error"
