"""Retry records for the conflict and persist stages: exponential backoff, then dead-letter."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

MAX_DELAY = 300.0


def backoff(attempt: int, base: float = 1.0) -> float:
    """Seconds to wait before retry ``attempt`` (base, 2 base, 4 base, ... capped)."""
    return min(base * 2.0 ** (attempt - 1), MAX_DELAY)


@dataclass(frozen=True, slots=True)
class RetryRecord:
    stage: str  # the stage to run again: "conflict" or "persist"
    record: dict[str, Any]
    attempt: int
    not_before: float
    error: str

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "stage": self.stage,
                "record": self.record,
                "attempt": self.attempt,
                "not_before": self.not_before,
                "error": self.error,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> RetryRecord:
        value = orjson.loads(raw)
        return cls(**value)


def next_try(
    stage: str,
    record: dict[str, Any],
    attempt: int,
    error: str,
    *,
    max_attempts: int = 6,
    base: float = 1.0,
    now: float | None = None,
) -> RetryRecord | None:
    """The retry after failed ``attempt`` (0 = the first run), or None when tries are spent."""
    if attempt + 1 >= max_attempts:
        return None
    moment = time.time() if now is None else now
    delay = backoff(attempt + 1, base)
    return RetryRecord(stage, record, attempt + 1, moment + delay, error[:500])
