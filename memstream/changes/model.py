"""Why long-term memory changes, and the change each add or removal makes (no IO); the record
published for it is in ``memstream_client.contract.changes``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memstream import tracing
from memstream.memory import MemoryItem
from memstream_client.contract.changes import CauseKind, Change, ChangeKind, change_id

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
