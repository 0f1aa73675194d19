"""Durable retries of stage records: backoff tiers, the retry horizon, the waiting record.

A record whose stage hit an outage waits on the tier topic of its attempt. Tier ``i`` waits
``min(base * 2**(i - 1), cap)`` seconds, so every record on one tier topic waits as long as the
others and they come due in the order they arrived: whoever reads a tier only ever waits for
its head. When due, the record goes back to its stage's topic with its retry state in headers.
Once it has been failing for ``horizon`` seconds it is dead-lettered as ``retries_exhausted``.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from memstream.events.origin import ORIGIN_HEADER, Origin

if TYPE_CHECKING:
    from memstream.settings import RetrySettings

ATTEMPT_HEADER = "memstream-retry-attempt"
SINCE_HEADER = "memstream-retry-since"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff from ``base`` seconds, doubling up to ``cap``, for ``horizon`` seconds in all."""

    base: float = 1.0
    cap: float = 300.0
    horizon: float = 3600.0

    @classmethod
    def from_settings(cls, settings: RetrySettings) -> RetryPolicy:
        return cls(
            settings.retry_base_seconds,
            settings.retry_max_delay_seconds,
            settings.retry_horizon_seconds,
        )

    @property
    def tiers(self) -> int:
        """How many tier topics there are: one per distinct delay."""
        tier = 1
        while self.base * 2 ** (tier - 1) < self.cap:
            tier += 1
        return tier

    def delay(self, tier: int) -> float:
        """Seconds a record waits on ``tier`` (1-based)."""
        return min(self.base * 2.0 ** (tier - 1), self.cap)

    def tier_of(self, attempt: int) -> int:
        """The tier of the ``attempt``-th retry (1-based)."""
        return min(max(attempt, 1), self.tiers)


def tier_topic(tier: int) -> str:
    """The unprefixed name of a tier's topic."""
    return f"retry-{tier}"


@dataclass(frozen=True, slots=True)
class Failing:
    """How long a record has been failing: tries that failed so far, and since when."""

    attempts: int
    since: float

    def headers(self) -> list[tuple[str, bytes]]:
        return [
            (ATTEMPT_HEADER, str(self.attempts).encode()),
            (SINCE_HEADER, repr(self.since).encode()),
        ]

    @classmethod
    def from_headers(cls, headers: Iterable[tuple[str, bytes | None]] | None) -> Failing | None:
        """The retry state a redelivered record carries; None for a first try (or garbage)."""
        found = {name: value for name, value in headers or () if value is not None}
        try:
            attempts = int(found[ATTEMPT_HEADER])
            since = float(found[SINCE_HEADER])
        except (KeyError, ValueError):
            return None
        return cls(attempts, since) if attempts > 0 and math.isfinite(since) else None


@dataclass(frozen=True, slots=True)
class RetryRecord:
    """A record waiting on a tier topic until ``not_before``, then sent back to ``topic``."""

    stage: str
    topic: str  # full name of the stage's input topic
    key: bytes | None
    value: bytes | None
    failing: Failing
    not_before: float
    error: str
    # The source record's Kafka time, which it goes back with: a stage that orders by it (the
    # session stage, by when a session ended) sees the same time on every try.
    timestamp: float | None = None
    # Where the public record it stems from sits: it goes back with it, for forgets to judge.
    origin: Origin | None = None

    def headers(self) -> list[tuple[str, bytes]]:
        """The headers it goes back to its stage with: its retry state and its origin."""
        origin = [(ORIGIN_HEADER, self.origin.encode())] if self.origin else []
        return self.failing.headers() + origin

    def due(self, now: float) -> bool:
        """Whether the record may go back to its stage at ``now`` (epoch seconds)."""
        return self.not_before <= now

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "stage": self.stage,
                "topic": self.topic,
                "key": _b64(self.key),
                "value": _b64(self.value),
                "attempts": self.failing.attempts,
                "since": self.failing.since,
                "not_before": self.not_before,
                "error": self.error,
                "timestamp": self.timestamp,
                "origin": self.origin.encode().decode() if self.origin else None,
            }
        )

    @classmethod
    def decode(cls, raw: bytes | None) -> RetryRecord:
        """Read a tier record back; ``ValueError`` when it is not one."""
        try:
            value = orjson.loads(raw or b"")
            fields: dict[str, Any] = dict(value)
            record = cls(
                stage=_str(fields["stage"]),
                topic=_str(fields["topic"]),
                key=_unb64(fields["key"]),
                value=_unb64(fields["value"]),
                failing=Failing(int(fields["attempts"]), float(fields["since"])),
                not_before=float(fields["not_before"]),
                error=_str(fields["error"]),
                timestamp=_time(fields.get("timestamp")),
                origin=Origin.decode(fields.get("origin")),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise ValueError(f"not a retry record: {exc!r}") from None
        if not record.topic or record.failing.attempts < 1:
            raise ValueError("not a retry record: no topic or no failed attempt")
        return record


def next_try(
    stage: str,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    before: Failing | None,
    error: str,
    policy: RetryPolicy,
    *,
    now: float,
    timestamp: float | None = None,
    origin: Origin | None = None,
) -> RetryRecord | None:
    """The retry after a failed try (``before``: the record's retry state, None on its first
    try), or None once it has been failing for the policy's horizon; ``timestamp`` is the
    record's Kafka time, kept for when it goes back."""
    failing = Failing(before.attempts + 1, before.since) if before else Failing(1, now)
    if now - failing.since >= policy.horizon:
        return None
    delay = policy.delay(policy.tier_of(failing.attempts))
    return RetryRecord(
        stage, topic, key, value, failing, now + delay, error[:500], timestamp, origin
    )


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: Any) -> bytes | None:
    if text is None:
        return None
    return base64.b64decode(_str(text), validate=True)


def _time(value: Any) -> float | None:
    # Kafka's "no time" is -1; records written before times were kept have none.
    if value is None or isinstance(value, bool):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value
