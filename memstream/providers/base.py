"""The long-term memory provider interfaces: what MemOS and Mem0 answer (``RemoteProvider``),
and what the rest of memstream uses (``LongTermProvider``: the built-in store, and the remote
ones wrapped by ``memstream.providers.ledgered``), whose writes say why they change memory so
that each change is recorded (``memstream.changes``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memstream.changes.model import Cause
from memstream.memory import MemoryItem, NewMemory


class RemoteProvider(Protocol):
    """What an external long-term store does."""

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


class LongTermProvider(RemoteProvider, Protocol):
    """What the load path, the long-term chain and the API use: writes name their cause (the
    API when unsaid), and every memory they change is recorded with it."""

    async def add(self, memories: Sequence[NewMemory], *, cause: Cause = ...) -> list[MemoryItem]:
        """Store memories (never twice, see ``RemoteProvider.add``); those stored are recorded
        as ``added`` and linked to the memories they supersede."""
        ...

    async def delete(self, tenant_id: str, ids: Sequence[str], *, cause: Cause = ...) -> list[str]:
        """Expire memories by id, each recorded as superseded, deleted or expired by ``cause``."""
        ...

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user; every memory is recorded as ``forgotten``."""
        ...
