"""What the HTTP long-term providers (MemOS, Mem0) share: one pooled ``httpx.AsyncClient`` per
provider, bounded retries for calls that are safe to repeat, and per-call metrics.
Why it works this way: docs/design/http-providers.md."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar, get_args

import httpx
from prometheus_client import Counter, Histogram

from memstream.errors import ConfigurationError, ProviderUnavailable
from memstream.failure.http import RETRY_STATUS, HttpRetry, describe, log_reply
from memstream.memory import MEMORY_TYPES, USER_PROFILE, MemoryKind, NewMemory
from memstream.pooled_http import pooled_client

log = logging.getLogger(__name__)
T = TypeVar("T")
FoundT = TypeVar("FoundT")

PROVIDER_SECONDS = Histogram(
    "memstream_provider_seconds",
    "Long-term provider call latency (retries included), by provider and call.",
    ["provider", "call"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PROVIDER_FAILURES = Counter(
    "memstream_provider_failures_total",
    "Long-term provider calls that failed after their retries, by provider and call.",
    ["provider", "call"],
)


class ProviderCallFailed(ProviderUnavailable):
    """One provider call failed; ``retryable`` says whether repeating it may help and
    ``status`` is the HTTP status when there was an answer."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


def base_url_of(url: str, what: str) -> str:
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ConfigurationError(f"the {what} URL must be http(s)://..., got {url!r}")
    return base


class ProviderHttp:
    """A pooled client on one provider's base URL with metrics and bounded retries."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        connect_timeout: float = 2.0,
        attempts: int = 3,
        backoff_seconds: float = 0.1,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ConfigurationError(f"{provider} timeouts must be positive")
        if attempts < 1:
            raise ConfigurationError(f"{provider} attempts must be at least 1")
        self.provider = provider
        self.base_url = base_url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.attempts = attempts
        self.backoff_seconds = backoff_seconds
        self._client = pooled_client(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            max_connections=max_connections,
            keepalive=max_connections // 4,
            transport=transport,
        )

    def __repr__(self) -> str:  # never the headers: they hold the API key
        return f"ProviderHttp({self.provider!r}, {self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(
        self,
        call: str,
        method: str,
        path: str,
        parse: Callable[[Any], T],
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        retry: bool = True,
        attempts: int | None = None,
        seconds: float | None = None,
    ) -> T:
        """One logical call: the request (repeated on retryable failures when ``retry``),
        its JSON body handed to ``parse``; ``parse`` raises ``ProviderCallFailed`` to refuse.
        ``seconds`` overrides the client's timeout for this call."""
        tries = (attempts or self.attempts) if retry else 1
        policy = HttpRetry(tries, self.backoff_seconds, spread=(0.5, 1.5))
        started = time.perf_counter()
        try:
            return await policy.run(
                partial(self._once, method, path, parse, json, params, seconds),
                partial(self._retried, call),
                worth=lambda exc: isinstance(exc, ProviderCallFailed) and exc.retryable,
            )
        except ProviderCallFailed:
            PROVIDER_FAILURES.labels(self.provider, call).inc()
            raise
        finally:
            PROVIDER_SECONDS.labels(self.provider, call).observe(time.perf_counter() - started)

    async def write_once(
        self,
        call: str,
        path: str,
        parse: Callable[[Any], T],
        *,
        json: Any,
        seconds: float,
        written: Callable[[], Awaitable[FoundT | None]],
    ) -> T | FoundT:
        """``POST`` a write that is not safe to repeat blindly (an add): after a retryable
        failure the write may have happened, so once the backoff has passed ``written`` looks
        for its effect, and the write is sent again only when that finds nothing. Answers
        the parsed answer, or what ``written`` found."""

        async def send() -> T:
            return await self.call(
                call, "POST", path, parse, json=json, retry=False, seconds=seconds
            )

        try:
            return await send()
        except ProviderCallFailed as exc:
            if not exc.retryable:
                raise
        await asyncio.sleep(self.backoff_seconds)
        found = await written()
        return found if found is not None else await send()

    def _retried(self, call: str, tried: int, failure: Exception, pause: float) -> None:
        log.info("%s %s failed (%s); retry %d in %.2fs", self.provider, call, failure, tried, pause)

    async def _once(
        self,
        method: str,
        path: str,
        parse: Callable[[Any], T],
        json: Any,
        params: Mapping[str, str] | None,
        seconds: float | None,
    ) -> T:
        within = seconds or self.timeout
        where = f"{self.provider} {method} {path}"
        try:
            # httpx times each phase; the outer bound also stops a server that trickles bytes.
            async with asyncio.timeout(within):
                response = await self._client.request(
                    method,
                    path,
                    json=json,
                    params=params,
                    timeout=httpx.Timeout(within, connect=min(self.connect_timeout, within)),
                )
        except (TimeoutError, httpx.TimeoutException):
            raise ProviderCallFailed(
                f"{where} did not answer within {within:g}s", retryable=False
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderCallFailed(
                f"{where} is not reachable: {describe(exc)}", retryable=True
            ) from None
        if response.is_error:
            log_reply(log, where, response.text)
            raise ProviderCallFailed(
                f"{where} answered HTTP {response.status_code}",
                retryable=response.status_code in RETRY_STATUS,
                status=response.status_code,
            )
        try:
            body = response.json()
        except ValueError:
            log_reply(log, where, response.text)
            raise ProviderCallFailed(
                f"{where} answered a body that is not JSON",
                retryable=False,
                status=response.status_code,
            ) from None
        try:
            return parse(body)
        except ProviderCallFailed:
            log_reply(log, where, body)
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            log_reply(log, where, body)
            raise ProviderCallFailed(
                f"{where} answered a malformed reply ({type(exc).__name__})",
                retryable=False,
                status=response.status_code,
            ) from None


def clamp01(value: object) -> float | None:
    """A score as a float in [0, 1]; None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        return None
    return min(1.0, max(0.0, number))


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time (naive means UTC) or epoch seconds, as an aware datetime."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def importance_of(value: object) -> int:
    """An importance in 1..10 from whatever a server kept (5 when it kept nothing usable)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 5
    try:
        return min(10, max(1, int(float(value))))
    except (ValueError, OverflowError):
        return 5


def kind_of(value: object) -> MemoryKind:
    """A memory kind from what a server kept ("fact" when it kept nothing usable: memories
    written before kinds existed are facts)."""
    return "episode" if value == "episode" else "fact"


def time_text(value: datetime | None) -> str | None:
    """A time as ISO 8601 in UTC (a naive one is taken as UTC), for a server's metadata."""
    if value is None:
        return None
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return aware.isoformat()


def validate_new(memory: NewMemory) -> None:
    """What every provider refuses to store (the built-in store's rules)."""
    if memory.memory_type not in MEMORY_TYPES:
        raise ValueError(f"unknown memory_type {memory.memory_type!r}")
    if memory.cube_id != USER_PROFILE and not memory.cube_id.startswith("agent_"):
        raise ValueError(f"cube_id must be {USER_PROFILE!r} or 'agent_<agent_id>'")
    if not memory.content.strip():
        raise ValueError("memory content is empty")
    if memory.kind not in get_args(MemoryKind):
        raise ValueError(f"unknown memory kind {memory.kind!r}")
