"""The deletes behind a forget (``memstream.forget``): a user's rows in every table that holds
them, ``_CHUNK`` rows per statement so that no transaction holds many rows locked, each
statement run again when it loses a deadlock to a concurrent writer."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    ColumnElement,
    Executable,
    Integer,
    Table,
    delete,
    distinct,
    literal_column,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store import stamps, turns
from memstream.store.database import again_on_deadlock
from memstream.store.schema import (
    agent_config,
    conversation_message,
    conversation_summary,
    long_term_memory,
    memory_change,
    memory_embedding,
    memory_key,
    memory_link,
    memory_term,
    processed_mark,
    provider_memory,
)

_CHUNK = 5000  # rows per DELETE
_IN_LIST = 500  # conversation ids per IN (...) list


async def providers_named(engine: AsyncEngine, tenant_id: str) -> set[str]:
    """The providers the tenant's agents are configured for or memstream wrote memories to."""
    configured = select(distinct(agent_config.c.long_memory_provider)).where(
        agent_config.c.tenant_id == tenant_id
    )
    written = select(distinct(provider_memory.c.provider)).where(
        provider_memory.c.tenant_id == tenant_id
    )
    async with engine.connect() as conn:
        names = set((await conn.execute(configured)).scalars())
        names |= set((await conn.execute(written)).scalars())
    return {name for name in names if name is not None}


async def erase_ledger(engine: AsyncEngine, tenant_id: str, provider: str, user_id: str) -> None:
    """The ledger's rows of what memstream wrote to ``provider`` for the user."""
    ledger = provider_memory.c
    scope = (ledger.tenant_id == tenant_id, ledger.provider == provider, ledger.user_id == user_id)
    await _delete_all(engine, provider_memory, scope)


async def erase_memory_rows(engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
    """The user's built-in memories with their vectors, postings and turn index, published
    changes, links and keyed items; the text of the changes not yet published (they still go
    out, before the user's ``forgotten`` ones, and the relay deletes them once out)."""
    for table in (memory_embedding, memory_term):
        await _delete_all(
            engine, table, (table.c.tenant_id == tenant_id, table.c.user_id == user_id)
        )
    await again_on_deadlock(lambda: turns.forget_turns(engine, tenant_id, user_id))
    await _delete_all(engine, long_term_memory, _of_user(long_term_memory, tenant_id, user_id))
    changes = memory_change.c
    user = (changes.tenant_id == tenant_id, changes.user_id == user_id)
    await _delete_all(engine, memory_change, (*user, changes.published_at.is_not(None)))
    unpublished = (
        update(memory_change)
        .where(*user, changes.published_at.is_(None), changes.content.is_not(None))
        .values(content=None)
    )
    await again_on_deadlock(lambda: _run(engine, unpublished))
    for table in (memory_link, memory_key):
        await _delete_all(
            engine, table, (table.c.tenant_id == tenant_id, table.c.user_id == user_id)
        )
    # The memories were expired (and their stamp raised) before; raised once more for the
    # rows gone, and kept: a stamp row outlives the user (``stamps``).
    await again_on_deadlock(lambda: _bump_stamp(engine, tenant_id, user_id))


async def _bump_stamp(engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
    async with engine.begin() as conn:
        await stamps.bump(conn, [(tenant_id, user_id)])


def _of_user(table: Table, tenant_id: str, user_id: str) -> tuple[ColumnElement[bool], ...]:
    return (table.c.tenant_id == tenant_id, table.c.user_id == user_id)


async def conversations_of(engine: AsyncEngine, tenant_id: str, user_id: str) -> list[str]:
    """The ids of the conversations the user has messages in."""
    messages = conversation_message.c
    query = select(distinct(messages.conversation_id)).where(
        messages.tenant_id == tenant_id, messages.user_id == user_id
    )
    async with engine.connect() as conn:
        return sorted((await conn.execute(query)).scalars())


async def erase_history(
    engine: AsyncEngine, tenant_id: str, user_id: str, conversations: Sequence[str]
) -> int:
    """The user's messages, and the summaries and marks of ``conversations``; answers how
    many messages were deleted."""
    scope = _of_user(conversation_message, tenant_id, user_id)
    deleted = await _delete_all(engine, conversation_message, scope)
    for start in range(0, len(conversations), _IN_LIST):
        chunk = conversations[start : start + _IN_LIST]
        for table in (conversation_summary, processed_mark):
            scope = (table.c.tenant_id == tenant_id, table.c.conversation_id.in_(chunk))
            await _delete_all(engine, table, scope)
    return deleted


async def _delete_all(
    engine: AsyncEngine, table: Table, scope: Sequence[ColumnElement[bool]]
) -> int:
    """Delete every row of ``table`` in ``scope``, ``_CHUNK`` rows per statement."""
    stmt: Executable
    if engine.dialect.name == "sqlite":
        rowid = literal_column("rowid", Integer())
        stmt = delete(table).where(rowid.in_(select(rowid).where(*scope).limit(_CHUNK)))
    else:
        stmt = delete(table).where(*scope).with_dialect_options(mysql_limit=_CHUNK)
    total = 0
    while True:
        done = await again_on_deadlock(lambda: _run(engine, stmt))
        total += done
        if done < _CHUNK:
            return total


async def _run(engine: AsyncEngine, stmt: Executable) -> int:
    """Run ``stmt`` in a transaction of its own; answers the rows it changed."""
    async with engine.begin() as conn:
        return int((await conn.execute(stmt)).rowcount or 0)
