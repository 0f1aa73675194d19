"""Describing what an HTTP server answered, for every HTTP client of the server (the LLM, the
embeddings endpoint, MemOS and Mem0); retrying a call is the client package's
(``memstream_client.retry``), shared with the API client. A failure's message says how a call
failed, never what the server answered: ``log_reply`` keeps the start of the reply at DEBUG.
"""

from __future__ import annotations

import logging

import httpx

from memstream_client.retry import RETRY_STATUS, HttpRetry, RetryLater, retry_after

__all__ = [
    "RETRY_STATUS",
    "SNIPPET_CHARS",
    "HttpRetry",
    "RetryLater",
    "describe",
    "log_reply",
    "retry_after",
    "snippet",
]

SNIPPET_CHARS = 200


def snippet(value: object) -> str:
    """``value`` as one line of at most ``SNIPPET_CHARS`` characters."""
    text = " ".join(str(value).split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "..."


def log_reply(logger: logging.Logger, where: str, reply: object) -> None:
    """The start of a server's reply, at DEBUG only: a reply may quote users' text (their
    memories, a model's output about their messages), so no failure's message carries it."""
    logger.debug("%s answered: %s", where, snippet(reply))


def describe(exc: httpx.HTTPError) -> str:
    """An httpx error as ``Type: message`` (the type alone when it has no message)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
