"""Every exception memstream raises on purpose, under one root ``MemstreamError``; the
hierarchy, and which of them the client defines, is drawn in docs/design/errors.md."""

from __future__ import annotations

from typing import Literal

from memstream_client.contract.errors import (
    ApiError,
    InvalidEvent,
    MemstreamError,
    Outage,
    Rejected,
    ServiceUnavailable,
)

LLMErrorKind = Literal["http", "timeout", "connection", "bad_response", "empty"]


class ConfigurationError(MemstreamError):
    """Settings that cannot work, found before anything runs."""


class CacheUnavailable(MemstreamError):
    """The hot cache, or the node a key lives on, failed or is not asked while it fails."""


class HistoryBehind(Outage):
    """The history stage has not stored a session's messages yet (it lags, or its group is
    rebalancing): the session's end is tried again later instead of holding up the worker."""


class ProviderUnavailable(Outage):
    """A long-term provider cannot serve the call (not configured, down, or refused)."""


class ReplayRefused(MemstreamError):
    """The consumer group still has live members: rewinding now would race them."""


class Refused(Rejected):
    """A write was refused for its data (not an outage); ``__cause__`` says why."""


class LLMError(MemstreamError):
    """The LLM endpoint gave no usable completion; ``kind`` says why."""

    def __init__(self, kind: LLMErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind: LLMErrorKind = kind
        self.detail = detail


class EmbeddingError(MemstreamError):
    """The embeddings endpoint gave no usable vectors (down, refused, or a wrong answer)."""


class JudgeOutputError(MemstreamError):
    """The judge model answered something that is not a usable list of memories."""


class MalformedDecision(MemstreamError):
    """The conflict model's answer is not a usable decision."""


class CpuWorkFailed(MemstreamError):
    """CPU work handed to a child process ran past its time limit or killed the process."""


__all__ = [
    "ApiError",
    "ConfigurationError",
    "CpuWorkFailed",
    "EmbeddingError",
    "HistoryBehind",
    "InvalidEvent",
    "JudgeOutputError",
    "LLMError",
    "LLMErrorKind",
    "MalformedDecision",
    "MemstreamError",
    "Outage",
    "ProviderUnavailable",
    "Refused",
    "Rejected",
    "ReplayRefused",
    "ServiceUnavailable",
]
