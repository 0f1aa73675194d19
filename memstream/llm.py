"""An OpenAI-compatible chat-completions client on one pooled ``httpx.AsyncClient``.

Every failure (HTTP status, timeout, connection, a body that is not a completion, an empty
completion) is an ``LLMError`` whose ``kind`` says which, so that callers can degrade (rule-based
judge, extractive summary) and count why. The API key is sent as a Bearer token and never logged.
An error's message never quotes the server's reply, which may be model output about users'
text: the start of the reply is logged at DEBUG only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx
from prometheus_client import Counter, Histogram

from memstream.errors import ConfigurationError, LLMError
from memstream.failure.http import describe, log_reply
from memstream.pooled_http import endpoint, pooled_client

if TYPE_CHECKING:
    from memstream.settings import LlmSettings

log = logging.getLogger(__name__)

# What the completion is for: a small fixed set, so the metric labels stay bounded.
Purpose = Literal["judge", "conflict", "summary", "other"]

LLM_REQUESTS = Counter(
    "memstream_llm_requests_total",
    "Chat-completion requests, by purpose and outcome (ok or the LLMError kind).",
    ["purpose", "outcome"],
)
LLM_SECONDS = Histogram(
    "memstream_llm_seconds",
    "Chat-completion latency, by purpose.",
    ["purpose"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)


@dataclass(frozen=True, slots=True)
class Completion:
    """A completion's text and why the model stopped (``length``: cut off at ``max_tokens``)."""

    text: str
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class LLMClient:
    """Chat completions from ``{base_url}/chat/completions`` (``base_url`` like
    ``http://host:port/v1``), temperature 0, JSON mode by default.

    At most ``max_in_flight`` requests are sent at once from this process; the others wait for
    a slot before their ``timeout`` starts, so that a local server that answers one request at
    a time is not asked for more than it serves within the timeout. ``max_tokens`` caps what
    any request asks for (a slow model's answer must fit in the timeout)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 20.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_in_flight: int = 32,
        max_tokens: int | None = None,
    ) -> None:
        self.url = endpoint(base_url, "/chat/completions", "LLM")
        if timeout <= 0 or max_in_flight < 1:
            raise ConfigurationError("the LLM timeout and requests in flight must be positive")
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self._client = pooled_client(
            api_key=api_key,
            timeout=httpx.Timeout(timeout),
            max_connections=max_in_flight,
            keepalive=min(8, max_in_flight),
            transport=transport,
        )
        self._slots = asyncio.Semaphore(max_in_flight)

    @classmethod
    def from_settings(cls, settings: LlmSettings) -> LLMClient | None:
        """The configured client, or None when no endpoint is set (rules and extracts then)."""
        if not settings.llm_base_url.strip():
            return None
        return cls(
            settings.llm_base_url,
            settings.llm_model,
            api_key=settings.llm_api_key.get_secret_value(),
            timeout=settings.llm_timeout_seconds,
            max_in_flight=settings.llm_max_in_flight,
            max_tokens=settings.llm_max_tokens,
        )

    def __repr__(self) -> str:
        return f"LLMClient(url={self.url!r}, model={self.model!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = True,
        max_tokens: int | None = None,
        purpose: Purpose = "other",
        model: str | None = None,
    ) -> Completion:
        """The completion of ``messages`` by ``model`` (else the client's); raises
        ``LLMError`` when there is none."""
        payload: dict[str, Any] = {
            "model": model or self.model,
            "messages": list(messages),
            "temperature": 0,
            "stream": False,
        }
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        if max_tokens is not None or self.max_tokens is not None:
            payload["max_tokens"] = min(t for t in (max_tokens, self.max_tokens) if t is not None)
        async with self._slots:
            return await self._timed(payload, purpose)

    async def _timed(self, payload: dict[str, Any], purpose: Purpose) -> Completion:
        started = time.perf_counter()
        outcome = "ok"
        try:
            # httpx times each phase; the outer bound also stops a server that trickles bytes.
            async with asyncio.timeout(self.timeout):
                completion = await self._complete(payload)
        except TimeoutError:
            outcome = "timeout"
            raise LLMError(
                "timeout", f"the LLM at {self.url} did not answer within {self.timeout:g}s"
            ) from None
        except LLMError as exc:
            outcome = exc.kind
            raise
        finally:
            LLM_REQUESTS.labels(purpose, outcome).inc()
            LLM_SECONDS.labels(purpose).observe(time.perf_counter() - started)
        return completion

    async def _complete(self, payload: dict[str, Any]) -> Completion:
        try:
            response = await self._client.post(self.url, json=payload)
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.HTTPError as exc:
            raise LLMError(
                "connection", f"the LLM at {self.url} is not reachable: {describe(exc)}"
            ) from None
        if response.is_error:
            log_reply(log, self.url, response.text)
            raise LLMError("http", f"the LLM at {self.url} answered HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            log_reply(log, self.url, response.text)
            raise LLMError(
                "bad_response", f"the LLM at {self.url} answered a body that is not JSON"
            ) from None
        return self._content(body)

    def _content(self, body: object) -> Completion:
        try:
            choice = body["choices"][0]  # type: ignore[index]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            log_reply(log, self.url, body)
            raise LLMError(
                "bad_response",
                f"the LLM at {self.url} answered without choices[0].message.content",
            ) from None
        if isinstance(content, list):
            # Some servers answer content parts instead of one string.
            content = "".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise LLMError(
                "bad_response",
                f"the LLM at {self.url} answered a {type(content).__name__} as message content",
            )
        if not content.strip():
            raise LLMError("empty", f"the LLM at {self.url} answered an empty completion")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        return Completion(content, finish if isinstance(finish, str) else None)
