"""An external provider whose writes are recorded in the ledger (``memstream.store.ledger``)
and, in the same transaction, in the outbox of ``memory-changed`` (``memstream.changes``).

A write the ledger fails to record fails the call, so the persist stage retries it (the
provider's add is idempotent, and a change is recorded under the same id again) and nothing
goes uncounted or unpublished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from memstream.changes.model import API, FORGET, Cause, added, removed
from memstream.memory import MemoryItem, NewMemory, is_provisional
from memstream.providers.base import RemoteProvider
from memstream.store.ledger import Also, ProviderLedger
from memstream.store.outbox import ChangeOutbox
from memstream_client.contract.changes import Change


class Ledgered:
    """An external provider whose writes are recorded in the ledger; reads pass through."""

    def __init__(
        self, provider: RemoteProvider, ledger: ProviderLedger, changes: ChangeOutbox | None = None
    ) -> None:
        self.provider = provider
        self.ledger = ledger
        self.changes = changes if changes is not None else ChangeOutbox()
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

    def _recording(self, changes: Sequence[Change]) -> Also:
        async def write(conn: AsyncConnection) -> None:
            await self.changes.write(conn, changes)

        return write

    async def add(self, memories: Sequence[NewMemory], *, cause: Cause = API) -> list[MemoryItem]:
        stored = await self.provider.add(memories)
        # A provider may keep no agent on a user-profile memory; the ledger keeps its writer,
        # as the built-in store does, when the answer is one item per input; so do the
        # changes, with what the input knew (its sources, its kind, what it supersedes).
        one_each = len(stored) == len(memories)
        writers = [m.agent_id for m in memories] if one_each else None
        written: list[tuple[MemoryItem, Sequence[str]]] = (
            [(_as_written(i, m), m.supersedes) for i, m in zip(stored, memories, strict=True)]
            if one_each
            else [(i, ()) for i in stored]
        )
        now = datetime.now(UTC)
        # A temporary id (MemOS adding asynchronously) is no memory yet: the add is tried
        # again until its id is confirmed, and only that one is announced.
        changes = [
            added(item, self.name, cause, supersedes, now)
            for item, supersedes in written
            if not is_provisional(item)
        ]
        await self.ledger.record(self.name, stored, writers, also=self._recording(changes))
        return stored

    async def delete(self, tenant_id: str, ids: Sequence[str], *, cause: Cause = API) -> list[str]:
        known = {item.id: item for item in await self.ledger.known(tenant_id, self.name, ids)}
        deleted = await self.provider.delete(tenant_id, ids)
        now = datetime.now(UTC)
        # A memory memstream never wrote there has no owner it knows of: no change to key.
        changes = [removed(known[i], self.name, cause, now) for i in deleted if i in known]
        # Superseded memories keep their recorded text; a user's delete erases it.
        await self.ledger.forget(
            tenant_id,
            self.name,
            deleted,
            erase=cause.kind != "conflict",
            also=self._recording(changes),
        )
        return deleted

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        known = await self.ledger.known_of_user(tenant_id, self.name, user_id)
        deleted = await self.provider.delete_user(tenant_id, user_id)
        gone = set(deleted)
        now = datetime.now(UTC)
        changes = [removed(item, self.name, FORGET, now) for item in known if item.id in gone]
        await self.ledger.forget_user(tenant_id, self.name, user_id, also=self._recording(changes))
        return deleted


def _as_written(item: MemoryItem, memory: NewMemory) -> MemoryItem:
    """The stored item with what its input said that the provider may not answer."""
    return replace(
        item,
        agent_id=memory.agent_id,
        source_event_ids=memory.source_event_ids or item.source_event_ids,
        kind=memory.kind,
        occurred_at=memory.occurred_at or item.occurred_at,
    )
