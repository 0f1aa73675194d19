"""Every exception memstream raises on purpose, under one root.

MemstreamError
├── Outage                   worth waiting out: a stage tries its record again later
│   ├── ServiceUnavailable   a required service (broker, database) does not answer
│   ├── HistoryBehind        a session's messages are not stored yet: its end is tried later
│   └── ProviderUnavailable  a long-term provider cannot serve the call
├── Rejected                 refused for what it is: retrying cannot help (dead-letter)
│   ├── InvalidEvent         an input record that cannot be accepted (``reason`` says why)
│   └── Refused              a write refused for its data
├── ConfigurationError       settings that cannot work together
├── CacheUnavailable         the hot cache (or its node for a key) fails: read the record instead
├── ReplayRefused            the consumer group is live: rewinding now would race it
├── LLMError                 the LLM endpoint gave no usable completion (``kind`` says why)
├── EmbeddingError           the embeddings endpoint gave no usable vectors
├── JudgeOutputError         the judge model's answer is not a usable list of memories
├── MalformedDecision        the conflict model's answer is not a usable decision
├── CpuWorkFailed            CPU work in a child process ran too long or killed its process
└── ApiError                 an error the query API answers with on purpose (status, code)

The root, ``Outage``, ``Rejected``, ``InvalidEvent``, ``ServiceUnavailable`` and ``ApiError``
are defined in ``memstream_client.contract.errors`` (the client raises them too, without the
server) and are the same classes here.
"""

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
