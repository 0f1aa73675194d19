"""The ledger of external providers: what memstream wrote to MemOS and Mem0 (``provider_memory``).

Neither server can count a tenant's memories by type, cube or agent, so the operations views
(``/v1/stats``) would see only the built-in store. ``memstream.providers.ledgered`` wraps an
external provider so that every memory its ``add`` answers is recorded here (idempotently, by
the provider's id) and every id its ``delete`` or ``delete_user`` removes is marked deleted,
whether the long-term chain or the API made the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Executable, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.memory import MemoryItem
from memstream.store.database import in_lists
from memstream.store.messages import utc_naive
from memstream.store.schema import provider_memory

# More writes committed with the ledger's (the changes of ``memstream.changes``).
Also = Callable[[AsyncConnection], Awaitable[None]] | None


class ProviderLedger:
    """Rows of ``provider_memory``: recorded on add, marked deleted on delete."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def record(
        self,
        provider: str,
        items: Sequence[MemoryItem],
        agent_ids: Sequence[str | None] | None = None,
        *,
        also: Also = None,
    ) -> None:
        """Record memories a provider stored, each with the agent that wrote it (``agent_ids``,
        else the item's own); one recorded already is live again, with its text."""
        if not items:
            return
        writers = list(agent_ids) if agent_ids is not None else [m.agent_id for m in items]
        rows = [
            {
                "tenant_id": m.tenant_id,
                "provider": provider,
                "memory_id": m.id,
                "user_id": m.user_id,
                "agent_id": agent_id,
                "cube_id": m.cube_id,
                "memory_type": m.memory_type,
                "content": m.content,
                "importance": m.importance,
                "created_at": utc_naive(m.created_at),
                "deleted_at": None,
            }
            for m, agent_id in {
                (m.tenant_id, m.id): (m, a) for m, a in zip(items, writers, strict=True)
            }.values()
        ]
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            insert = sqlite.insert(provider_memory)
            stmt = insert.on_conflict_do_update(
                index_elements=["tenant_id", "provider", "memory_id"],
                set_={"deleted_at": insert.excluded.deleted_at, "content": insert.excluded.content},
            )
        else:
            # A deleted row's text was erased: a memory stored again brings it back. Both from
            # the inserted row: a bound value here breaks aiomysql's batched insert of rows.
            upsert = mysql.insert(provider_memory)
            stmt = upsert.on_duplicate_key_update(
                deleted_at=upsert.inserted.deleted_at, content=upsert.inserted.content
            )
        async with self._engine.begin() as conn:
            await conn.execute(stmt, rows)
            if also is not None:
                await also(conn)

    async def known(self, tenant_id: str, provider: str, ids: Sequence[str]) -> list[MemoryItem]:
        """The live memories among ``ids`` memstream wrote to ``provider``, as recorded."""
        found: list[MemoryItem] = []
        async with self._engine.connect() as conn:
            for chunk in in_lists(ids):
                query = select(provider_memory).where(
                    provider_memory.c.tenant_id == tenant_id,
                    provider_memory.c.provider == provider,
                    provider_memory.c.memory_id.in_(chunk),
                    provider_memory.c.deleted_at.is_(None),
                )
                found += [ledger_item(row) for row in (await conn.execute(query)).all()]
        return found

    async def known_of_user(self, tenant_id: str, provider: str, user_id: str) -> list[MemoryItem]:
        """The live memories of a user memstream wrote to ``provider``, as recorded."""
        query = select(provider_memory).where(
            provider_memory.c.tenant_id == tenant_id,
            provider_memory.c.provider == provider,
            provider_memory.c.user_id == user_id,
            provider_memory.c.deleted_at.is_(None),
        )
        async with self._engine.connect() as conn:
            return [ledger_item(row) for row in (await conn.execute(query)).all()]

    async def forget(
        self,
        tenant_id: str,
        provider: str,
        ids: Sequence[str],
        *,
        erase: bool = True,
        also: Also = None,
    ) -> None:
        """Mark memories the provider deleted, and erase the copy of their text unless told to
        keep it (a superseded memory's, the record of what was once known)."""
        now = datetime.now(UTC).replace(tzinfo=None)
        values: dict[str, object] = {"deleted_at": now, **({"content": ""} if erase else {})}
        async with self._engine.begin() as conn:
            for chunk in in_lists(ids):
                await conn.execute(
                    update(provider_memory)
                    .where(
                        provider_memory.c.tenant_id == tenant_id,
                        provider_memory.c.provider == provider,
                        provider_memory.c.memory_id.in_(chunk),
                        provider_memory.c.deleted_at.is_(None),
                    )
                    .values(values)
                )
            if also is not None:
                await also(conn)

    async def forget_user(
        self, tenant_id: str, provider: str, user_id: str, *, also: Also = None
    ) -> None:
        """Mark every memory of a user the provider forgot."""
        async with self._engine.begin() as conn:
            await conn.execute(
                update(provider_memory)
                .where(
                    provider_memory.c.tenant_id == tenant_id,
                    provider_memory.c.provider == provider,
                    provider_memory.c.user_id == user_id,
                    provider_memory.c.deleted_at.is_(None),
                )
                .values(deleted_at=datetime.now(UTC).replace(tzinfo=None))
            )
            if also is not None:
                await also(conn)


# What a ledger row and a memory item share, by name.
_SHARED = ("tenant_id", "user_id", "agent_id", "cube_id", "memory_type", "content", "importance")


def ledger_item(row: Any) -> MemoryItem:
    """A ledger row as a memory item (the ledger keeps no sources, kind or date)."""
    created: datetime = row.created_at
    aware = created.replace(tzinfo=UTC) if created.tzinfo is None else created
    shared = {name: row._mapping[name] for name in _SHARED}
    return MemoryItem(id=row.memory_id, source_event_ids=(), created_at=aware, **shared)
