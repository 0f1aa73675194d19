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
from typing import TYPE_CHECKING, Any, Literal

import httpx
from prometheus_client import Counter, Histogram

from memstream.errors import ConfigurationError, LLMError
from memstream.failure.http import describe, log_reply

if TYPE_CHECKING:
    from memstream.settings import Settings

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


class LLMClient:
    """Chat completions from ``{base_url}/chat/completions`` (``base_url`` like
    ``http://host:port/v1``), temperature 0, JSON mode by default."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 20.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = base_url.strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ConfigurationError(f"the LLM base URL must be http(s)://..., got {base_url!r}")
        if timeout <= 0:
            raise ConfigurationError("the LLM timeout must be positive")
        # Accept a full endpoint URL as well as the usual ``.../v1`` base.
        self.url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        self.model = model
        self.timeout = timeout
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient | None:
        """The configured client, or None when no endpoint is set (rules and extracts then)."""
        if not settings.llm_base_url.strip():
            return None
        return cls(
            settings.llm_base_url,
            settings.llm_model,
            api_key=settings.llm_api_key.get_secret_value(),
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
    ) -> str:
        """The completion text of ``messages`` by ``model`` (else the client's); raises
        ``LLMError`` when there is none."""
        payload: dict[str, Any] = {
            "model": model or self.model,
            "messages": list(messages),
            "temperature": 0,
            "stream": False,
        }
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        started = time.perf_counter()
        outcome = "ok"
        try:
            # httpx times each phase; the outer bound also stops a server that trickles bytes.
            async with asyncio.timeout(self.timeout):
                text = await self._complete(payload)
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
        return text

    async def _complete(self, payload: dict[str, Any]) -> str:
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

    def _content(self, body: object) -> str:
        try:
            content = body["choices"][0]["message"]["content"]  # type: ignore[index]
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
        return content
