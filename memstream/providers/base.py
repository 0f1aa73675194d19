"""The long-term memory provider interface shared by the built-in store, MemOS and Mem0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memstream.memory import MemoryItem, NewMemory


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
