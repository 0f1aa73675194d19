"""The vocabulary of long-term memory every layer shares: types, cubes, new and stored items."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

# Defined with the API's bodies (the client needs them too); the server reads them here.
from memstream_client.contract.api import MEMORY_TYPES as MEMORY_TYPES
from memstream_client.contract.api import MemoryType as MemoryType

USER_PROFILE = "user_profile"
# A fact is distilled and kept until contradicted; an episode is what was said, dated, kept for
# a retention period.
MemoryKind = Literal["fact", "episode"]


def agent_cube(agent_id: str) -> str:
    """The cube holding one agent's own memories."""
    return f"agent_{agent_id}"


def readable_cubes(agent_id: str | None) -> list[str]:
    """Cubes a request may read: the user's profile, plus the agent's cube when there is one."""
    return [USER_PROFILE] + ([agent_cube(agent_id)] if agent_id else [])


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to store; ``source_event_ids`` are the message ``event_id``s it came from."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    cube_id: str
    memory_type: MemoryType
    content: str
    importance: int = 5
    source_event_ids: tuple[str, ...] = ()
    kind: MemoryKind = "fact"
    occurred_at: datetime | None = None
    # The live memories this one replaces (conflict resolution): expired once it is stored,
    # and linked to it in the record.
    supersedes: tuple[str, ...] = ()
    # When it was first stored, for a memory brought back (an import): kept, since ordering
    # and retention read it; None is now.
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A stored memory; ``score`` in [0, 1] is set by search (1.0 elsewhere)."""

    id: str
    tenant_id: str
    user_id: str
    agent_id: str | None
    cube_id: str
    memory_type: MemoryType
    content: str
    importance: int
    source_event_ids: tuple[str, ...]
    created_at: datetime
    score: float = 1.0
    kind: MemoryKind = "fact"
    occurred_at: datetime | None = None
    extra: dict[str, object] = field(default_factory=dict)
    # "memory", or "history" for a passage of a stored turn a search answered with.
    origin: str = "memory"


def is_provisional(item: MemoryItem) -> bool:
    """Whether an added item's id is a temporary one its provider has not confirmed (MemOS
    adding asynchronously): the memory may still vanish, so nothing may rely on it yet."""
    return bool(item.extra.get("provisional"))
