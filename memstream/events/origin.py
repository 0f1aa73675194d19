"""Where the public record a piece of work stems from sits, carried along with the work (in a
header through the retry tiers and redrive, in the dead letter's ``source``) so that a forget
can tell exactly whether the work came before it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the public record a piece of work stems from sits: topic, partition, offset."""

    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.partition}:{self.offset}:{self.topic}".encode()

    @classmethod
    def decode(cls, raw: bytes | str | None) -> Origin | None:
        """An encoded origin; None for anything else."""
        if raw is None:
            return None
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        parts = text.split(":", 2)
        if len(parts) != 3 or not parts[2]:
            return None
        try:
            return cls(parts[2], int(parts[0]), int(parts[1]))
        except ValueError:
            return None


ORIGIN_HEADER = "memstream-origin"


def origin_in(headers: Iterable[tuple[str, bytes | None]] | None) -> Origin | None:
    """The origin a record's headers carry (a retry, a redriven dead letter), if any."""
    for name, value in headers or ():
        if name == ORIGIN_HEADER:
            return Origin.decode(value)
    return None
