"""The long-term memory provider interface shared by the built-in store, MemOS and Mem0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

MemoryType = Literal["text_mem", "pref_mem", "skill_mem", "tool_mem"]
MEMORY_TYPES: tuple[MemoryType, ...] = ("text_mem", "pref_mem", "skill_mem", "tool_mem")
USER_PROFILE = "user_profile"


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
    extra: dict[str, object] = field(default_factory=dict)


class LongTermProvider(Protocol):
    """What the load path and the persist stage need from a long-term store."""

    name: str  # "MYSQL", "MEMOS" or "MEM0"

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        *,
        top_k: int = 10,
    ) -> list[MemoryItem]:
        """Live memories of the readable cubes, most relevant first, scores in [0, 1];
        ``top_k`` per cube."""
        ...

    async def add(self, memories: Sequence[NewMemory]) -> list[MemoryItem]:
        """Store memories; one already stored with the same content in the same cube is
        returned as it is, never stored twice."""
        ...

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> list[str]:
        """Expire memories by id; answers the ids that were live and are now deleted."""
        ...

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> Sequence[MemoryItem]:
        """Every live memory of the readable cubes, newest first."""
        ...

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user: expire every memory of every cube; answers the deleted ids."""
        ...
