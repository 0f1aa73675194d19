"""An OpenAI-compatible embeddings client: ``POST {base_url}/embeddings`` on one pooled
``httpx.AsyncClient``.

Texts go in batches of ``batch_size``; a batch that fails on the way (connection, timeout,
HTTP 429 or a transient 5xx) is tried again after a capped exponential backoff
(``memstream.failure.http``), one refused for its data (any other 4xx) is not. Every answer is
checked: one vector per text, every vector of the dimension the first answer had. Vectors come
back as float32 rows of unit length, so a dot product is a cosine. Every failure is an
``EmbeddingError``; the API key is never logged, and no error quotes the server's reply (it may
echo the texts): its start is logged at DEBUG only.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import numpy.typing as npt

from memstream.errors import ConfigurationError, EmbeddingError
from memstream.failure.http import (
    RETRY_STATUS,
    HttpRetry,
    RetryLater,
    describe,
    log_reply,
    retry_after,
)
from memstream.pooled_http import endpoint, pooled_client

if TYPE_CHECKING:
    from memstream.settings import EmbeddingSettings

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
"""A matrix with one unit-length float32 row per text."""


class EmbeddingClient:
    """Embeddings from ``{base_url}/embeddings`` (``base_url`` like ``http://host:port/v1``)."""

    MAX_CONNECTIONS = 8
    """Requests one client has in flight at most; more wait for a connection."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        *,
        batch_size: int = 64,
        timeout: float = 10.0,
        max_attempts: int = 4,
        backoff_base: float = 0.2,
        backoff_max: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = endpoint(base_url, "/embeddings", "embeddings")
        if batch_size < 1 or timeout <= 0 or max_attempts < 1:
            raise ConfigurationError(
                "the embeddings batch size, timeout and attempts must be positive"
            )
        self.model = model
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._retry = HttpRetry(max_attempts, backoff_base, backoff_max, spread=(0.5, 1.0))
        self._dimension: int | None = None
        self._client = pooled_client(
            api_key=api_key,
            timeout=httpx.Timeout(timeout),
            max_connections=self.MAX_CONNECTIONS,
            keepalive=4,
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings) -> EmbeddingClient | None:
        """The configured client, or None when no endpoint is set (lexical retrieval only)."""
        if not settings.embedding_base_url.strip():
            return None
        return cls(
            settings.embedding_base_url,
            settings.embedding_model,
            api_key=settings.embedding_api_key.get_secret_value(),
            batch_size=settings.embedding_batch_size,
            timeout=settings.embedding_timeout_seconds,
        )

    def __repr__(self) -> str:
        return f"EmbeddingClient(url={self.url!r}, model={self.model!r})"

    @property
    def dimension(self) -> int | None:
        """The vectors' dimension, fixed by the first answer (None before it)."""
        return self._dimension

    async def __aenter__(self) -> EmbeddingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length row per text, in order; raises ``EmbeddingError``."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        rows = [
            await self._embed_batch(list(texts[start : start + self.batch_size]))
            for start in range(0, len(texts), self.batch_size)
        ]
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return rows[0] if len(rows) == 1 else np.concatenate(rows)

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """The unit-length vector of one text."""
        row: npt.NDArray[np.float32] = (await self.embed([text]))[0]
        return row

    async def _embed_batch(self, texts: list[str]) -> Vectors:
        payload = {"model": self.model, "input": texts}
        try:
            body = await self._retry.run(partial(self._attempt, payload), self._retried)
        except RetryLater as last:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} failed {self.max_attempts} times; "
                f"last: {last.detail}"
            ) from None
        return self._vectors(body, len(texts))

    async def _attempt(self, payload: dict[str, Any]) -> Any:
        try:
            # httpx times each phase; the outer bound also stops a server that trickles.
            async with asyncio.timeout(self.timeout):
                return await self._post(payload)
        except TimeoutError:
            raise RetryLater(f"no answer within {self.timeout:g}s") from None

    def _retried(self, tried: int, failure: Exception, pause: float) -> None:
        log.warning(
            "embeddings at %s failed (%s); attempt %d of %d in %.2fs",
            self.url,
            failure,
            tried + 1,
            self.max_attempts,
            pause,
        )

    async def _post(self, payload: dict[str, Any]) -> Any:
        try:
            response = await self._client.post(self.url, json=payload)
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.HTTPError as exc:
            raise RetryLater(f"not reachable: {describe(exc)}") from None
        if response.is_error:
            log_reply(log, self.url, response.text)
        if response.status_code in RETRY_STATUS:
            raise RetryLater(f"HTTP {response.status_code}", after=retry_after(response))
        if response.is_error:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} refused the request with HTTP "
                f"{response.status_code}"
            )
        try:
            return response.json()
        except ValueError:
            log_reply(log, self.url, response.text)
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered a body that is not JSON"
            ) from None

    def _vectors(self, body: Any, count: int) -> Vectors:
        """The ``count`` vectors of an answer as unit-length float32 rows, in input order."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            log_reply(log, self.url, body)
            raise self._bad("answered without a data list")
        if len(data) != count:
            raise self._bad(f"answered {len(data)} vectors for {count} texts")
        rows: list[Any] = [None] * count
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
                raise self._bad(f"answered a missing, repeated or out-of-range index {index!r}")
            if not isinstance(vector, list) or not vector:
                raise self._bad(f"answered no embedding list at index {index}")
            rows[index] = vector
        dimension = self._dimension or len(rows[0])
        for index, vector in enumerate(rows):
            if len(vector) != dimension:
                raise self._bad(
                    f"answered a {len(vector)}-dimensional vector at index {index}, "
                    f"where the vectors have {dimension} dimensions"
                )
        numbers = np.asarray(rows)
        if numbers.dtype.kind not in "iuf":  # bools, strings, nulls and objects are not
            raise self._bad("answered an embedding that is not a list of numbers")
        matrix = numbers.astype(np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
            bad = next(i for i, n in enumerate(norms) if not math.isfinite(n) or n == 0.0)
            raise self._bad(f"answered a zero or non-finite vector at index {bad}")
        self._dimension = dimension
        unit: Vectors = (matrix / norms[:, None]).astype(np.float32)
        return unit

    def _bad(self, what: str) -> EmbeddingError:
        return EmbeddingError(f"the embeddings endpoint {self.url} {what}")
