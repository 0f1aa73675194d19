"""Whose memory a connection reaches, and what its tool calls work with; no MCP code, so the API
reads a request's scope before the SDK is loaded."""

from __future__ import annotations

from dataclasses import dataclass

from memstream_client import AsyncClient


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memory one connection reaches."""

    tenant_id: str
    user_id: str
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """What a tool call works with: the API client and the connection's scope."""

    api: AsyncClient
    scope: Scope
