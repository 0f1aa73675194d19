"""The errors the contract and the client raise: the root of memstream's errors, the two kinds a
caller tells apart (an outage, worth waiting out; a rejection, which retrying cannot help) and
the three a platform service meets (a refused event, a refused call, no answer).
``memstream.errors`` holds them with every other error and draws the hierarchy."""

from __future__ import annotations


class MemstreamError(Exception):
    """Root of every error memstream raises on purpose."""


class Outage(MemstreamError):
    """Something memstream needs does not answer, or not yet: worth waiting out."""


class Rejected(MemstreamError):
    """Input refused for what it is: trying it again cannot help."""


class InvalidEvent(Rejected):
    """A record that cannot be accepted; ``reason`` is the dead-letter machine code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class ServiceUnavailable(Outage):
    """A service memstream needs does not answer."""


class ApiError(MemstreamError):
    """An error the API answers with on purpose: ``status`` (4xx), machine ``code``, message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
