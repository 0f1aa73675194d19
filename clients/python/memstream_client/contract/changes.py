"""The ``memory-changed`` record (``schemas/memory-changed.v1.json``): one change of one
memory, its stable id, the value and the key it is published with (no IO)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

ChangeKind = Literal["added", "superseded", "deleted", "expired", "forgotten"]
CauseKind = Literal["session", "api", "conflict", "retention", "forget"]
SCHEMA = "memory-changed.v1"


@dataclass(frozen=True, slots=True)
class Change:
    """One change of one memory, as ``memory-changed`` publishes it."""

    change_id: str
    change: ChangeKind
    provider: str
    tenant_id: str
    user_id: str
    agent_id: str | None
    cube_id: str
    memory_id: str
    kind: str
    memory_type: str
    content: str | None
    supersedes: tuple[str, ...]
    superseded_by: tuple[str, ...]
    cause: CauseKind
    conversation_id: str | None
    source_event_ids: tuple[str, ...]
    occurred_at: datetime | None
    changed_at: datetime
    trace: str | None = None  # ``traceparent`` of the session end behind it


def change_id(tenant_id: str, provider: str, memory_id: str, change: ChangeKind) -> str:
    """The same change of the same memory always has this id: a memory is added once and
    removed once (its id never lives again)."""
    key = "\x1f".join((tenant_id, provider, memory_id, change)).encode()
    return hashlib.sha256(key).hexdigest()[:32]


def _time(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat(timespec="microseconds").replace("+00:00", "Z")


def value_of(change: Change) -> dict[str, Any]:
    """The JSON object published for ``change`` (``schemas/memory-changed.v1.json``), without
    its ``content``: the outbox keeps the text apart (``with_content``)."""
    value: dict[str, Any] = {
        "schema": SCHEMA,
        "change_id": change.change_id,
        "change": change.change,
        "tenant_id": change.tenant_id,
        "user_id": change.user_id,
        "agent_id": change.agent_id,
        "cube_id": change.cube_id,
        "memory_id": change.memory_id,
        "provider": change.provider,
        "kind": change.kind,
        "memory_type": change.memory_type,
        "supersedes": list(change.supersedes),
        "superseded_by": list(change.superseded_by),
        "cause": change.cause,
        "conversation_id": change.conversation_id,
        "source_event_ids": list(change.source_event_ids),
        "occurred_at": _time(change.occurred_at),
        "changed_at": _time(change.changed_at),
    }
    trace_id = trace_id_of(change.trace)
    if trace_id is not None:
        value["trace_id"] = trace_id
    return value


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) of a W3C ``traceparent`` value; None when it is not one."""
    parts = (traceparent or "").strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    trace_id = parts[1].lower()
    if len(trace_id) != 32 or trace_id.strip("0123456789abcdef") or trace_id == "0" * 32:
        return None
    return trace_id


def with_content(value: dict[str, Any], content: str | None) -> dict[str, Any]:
    """The value as published: an ``added`` change carries the memory's text (empty when the
    memory was erased before its change went out), no other change does."""
    if value.get("change") != "added":
        return value
    return {**value, "content": content or ""}


def key_of(tenant_id: str, user_id: str) -> bytes:
    """The record key, ``["tenant", "user"]`` as JSON: one user's changes share a partition,
    so they stay in order."""
    return orjson.dumps([tenant_id, user_id])
