"""Where the public record a piece of work stems from sits, carried along with the work (in a
header through the retry tiers and redrive, in the dead letter's ``source``) so that a forget
can tell exactly whether the work came before it."""

from __future__ import annotations

from collections.abc import Iterable

from memstream_client.contract.deadletter import Origin

__all__ = ["ORIGIN_HEADER", "Origin", "origin_in"]

ORIGIN_HEADER = "memstream-origin"


def origin_in(headers: Iterable[tuple[str, bytes | None]] | None) -> Origin | None:
    """The origin a record's headers carry (a retry, a redriven dead letter), if any."""
    for name, value in headers or ():
        if name == ORIGIN_HEADER:
            return Origin.decode(value)
    return None
