"""Whose data a conversation or a memory is, for callers that act for one user only (the MCP
tools): a conversation is a user's when every message stored of it is, a memory when the
built-in store or the external providers' ledger has it live under that user."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import conversation_message, long_term_memory, provider_memory


async def foreign_conversation(
    engine: AsyncEngine, tenant_id: str, conversation_id: str, user_id: str
) -> bool:
    """Whether the conversation holds a stored message of another user than ``user_id``."""
    m = conversation_message.c
    query = select(
        exists().where(
            m.tenant_id == tenant_id, m.conversation_id == conversation_id, m.user_id != user_id
        )
    )
    async with engine.connect() as conn:
        return bool((await conn.execute(query)).scalar())


async def memory_of_user(engine: AsyncEngine, tenant_id: str, memory_id: str, user_id: str) -> bool:
    """Whether ``memory_id`` is a live memory of ``user_id``, in the built-in store or among
    those memstream wrote to an external provider."""
    builtin, ledger = long_term_memory.c, provider_memory.c
    query = select(
        exists().where(
            builtin.tenant_id == tenant_id,
            builtin.id == memory_id,
            builtin.user_id == user_id,
            builtin.deleted_at.is_(None),
        )
        | exists().where(
            ledger.tenant_id == tenant_id,
            ledger.memory_id == memory_id,
            ledger.user_id == user_id,
            ledger.deleted_at.is_(None),
        )
    )
    async with engine.connect() as conn:
        return bool((await conn.execute(query)).scalar())
