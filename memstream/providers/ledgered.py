"""An external provider whose writes are recorded in the ledger (``memstream.store.ledger``).

A write the ledger fails to record fails the call, so the persist stage retries it (the
provider's add is idempotent) and nothing goes uncounted.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstream.memory import MemoryItem, NewMemory
from memstream.providers.base import LongTermProvider
from memstream.store.ledger import ProviderLedger


class Ledgered:
    """An external provider whose writes are recorded in the ledger; reads pass through."""

    def __init__(self, provider: LongTermProvider, ledger: ProviderLedger) -> None:
        self.provider = provider
        self.ledger = ledger
        self.name = provider.name

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        *,
        top_k: int = 10,
    ) -> list[MemoryItem]:
        return await self.provider.search(tenant_id, user_id, agent_id, query, top_k=top_k)

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> Sequence[MemoryItem]:
        return await self.provider.list_live(tenant_id, user_id, agent_id)

    async def add(self, memories: Sequence[NewMemory]) -> list[MemoryItem]:
        stored = await self.provider.add(memories)
        # A provider may keep no agent on a user-profile memory; the ledger keeps its writer,
        # as the built-in store does, when the answer is one item per input.
        writers = [m.agent_id for m in memories] if len(stored) == len(memories) else None
        await self.ledger.record(self.name, stored, writers)
        return stored

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> list[str]:
        deleted = await self.provider.delete(tenant_id, ids)
        await self.ledger.forget(tenant_id, self.name, deleted)
        return deleted

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        deleted = await self.provider.delete_user(tenant_id, user_id)
        await self.ledger.forget_user(tenant_id, self.name, user_id)
        return deleted
