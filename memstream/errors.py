"""Exceptions raised by memstream.

MemstreamError
├── InvalidEvent          an input record that cannot be accepted (goes to dead-letter)
├── ConfigurationError    settings that cannot work together
└── ServiceUnavailable    a required service (broker, database) does not answer
"""

from __future__ import annotations


class MemstreamError(Exception):
    """Root of every error memstream raises on purpose."""


class InvalidEvent(MemstreamError):
    """A record that cannot be accepted; ``reason`` is the dead-letter machine code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class ConfigurationError(MemstreamError):
    """Settings that cannot work, found before anything runs."""


class ServiceUnavailable(MemstreamError):
    """A service memstream needs does not answer."""


class ProviderUnavailable(MemstreamError):
    """A long-term provider cannot serve the call (not configured, down, or refused)."""
