"""What a change to long-term memory says, and the value published for it (no IO)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from memstream import tracing
from memstream.memory import MemoryItem

ChangeKind = Literal["added", "superseded", "deleted", "expired", "forgotten"]
CauseKind = Literal["session", "api", "conflict", "retention", "forget"]
SCHEMA = "memory-changed.v1"
TOPIC = "memory-changed"

# What removing a memory is called, by why it was removed.
_REMOVAL: dict[CauseKind, ChangeKind] = {
    "conflict": "superseded",
    "api": "deleted",
    "retention": "expired",
    "forget": "forgotten",
}


@dataclass(frozen=True, slots=True, eq=False)
class Cause:
    """Why memories change: a session's memories added (``session``) or the old ones they
    supersede (``conflict``, with the newer ids of each), the API, retention or forgetting."""

    kind: CauseKind
    conversation_id: str | None = None
    superseded_by: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # The trace context (``traceparent``) of the session end behind the change.
    trace: str | None = None

    @classmethod
    def session(cls, conversation_id: str, trace: str | None = None) -> Cause:
        return cls("session", conversation_id, trace=trace)

    @classmethod
    def conflict(
        cls,
        conversation_id: str,
        superseded_by: Mapping[str, Sequence[str]],
        trace: str | None = None,
    ) -> Cause:
        return cls("conflict", conversation_id, superseded_by, trace)

    @property
    def trace_id(self) -> str | None:
        return tracing.trace_id_of(self.trace)


API = Cause("api")
RETENTION = Cause("retention")
FORGET = Cause("forget")


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


def _change(
    item: MemoryItem,
    provider: str,
    change: ChangeKind,
    cause: Cause,
    now: datetime,
    *,
    content: str | None = None,
    supersedes: tuple[str, ...] = (),
    superseded_by: tuple[str, ...] = (),
    keep_sources: bool = True,
) -> Change:
    return Change(
        change_id=change_id(item.tenant_id, provider, item.id, change),
        change=change,
        provider=provider,
        tenant_id=item.tenant_id,
        user_id=item.user_id,
        agent_id=item.agent_id,
        cube_id=item.cube_id,
        memory_id=item.id,
        kind=item.kind,
        memory_type=item.memory_type,
        content=content,
        supersedes=supersedes,
        superseded_by=superseded_by,
        cause=cause.kind,
        conversation_id=cause.conversation_id,
        source_event_ids=item.source_event_ids if keep_sources else (),
        occurred_at=item.occurred_at if keep_sources else None,
        changed_at=now,
        trace=cause.trace,
    )


def added(
    item: MemoryItem, provider: str, cause: Cause, supersedes: Sequence[str], now: datetime
) -> Change:
    """``item`` was stored; it replaced ``supersedes``."""
    return _change(
        item, provider, "added", cause, now, content=item.content, supersedes=tuple(supersedes)
    )


def removed(item: MemoryItem, provider: str, cause: Cause, now: datetime) -> Change:
    """``item`` is no longer live, for ``cause``: superseded, deleted, expired or forgotten.
    A forgotten memory keeps nothing of what it said or where it came from."""
    change = _REMOVAL.get(cause.kind, "deleted")
    if change == "forgotten":
        return _change(item, provider, change, cause, now, keep_sources=False)
    superseded_by = tuple(cause.superseded_by.get(item.id, ()))
    return _change(item, provider, change, cause, now, superseded_by=superseded_by)


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
    if change.trace:
        value["trace_id"] = tracing.trace_id_of(change.trace)
    return value


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
