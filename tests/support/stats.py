"""Known data for the stats API and its dashboard: every count, bucket and time is fixed."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.memory import NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.schema import long_term_memory

T0 = datetime(2026, 3, 1, 10, 0)


def message(tenant: str, conversation: str, n: int, at: datetime) -> StoredMessage:
    return StoredMessage(
        tenant_id=tenant,
        conversation_id=conversation,
        event_id=f"{conversation}-{n}",
        user_id="u1",
        agent_id="a1",
        role="user",
        message_type="chat",
        content=f"message {n}",
        token_count=3,
        created_at=at,
        source_conversation_id=conversation,
    )


async def seed(engine: AsyncEngine, tenant: str) -> None:
    """3 conversations, 7 messages (4 at 10:xx, 3 at 12:xx on 2026-03-01); memories: 5 for
    agent a1, 2 for agent a2, 2 profile, one of a1 expired, at known times and importance."""
    store = MessageStore(engine)
    msgs = [message(tenant, "c1", i, T0 + timedelta(minutes=i)) for i in range(3)]
    msgs.append(message(tenant, "c2", 0, T0 + timedelta(minutes=30)))
    msgs += [message(tenant, "c3", i, T0 + timedelta(hours=2, minutes=i)) for i in range(3)]
    await store.insert_many(msgs)

    provider = BuiltinProvider(engine)
    specs: list[tuple[str | None, str, str, int, datetime]] = [
        ("a1", "agent_a1", "text_mem", 5, T0 + timedelta(minutes=5)),
        ("a1", "agent_a1", "text_mem", 7, T0 + timedelta(minutes=6)),
        ("a1", "agent_a1", "skill_mem", 7, T0 + timedelta(hours=1, minutes=1)),
        ("a1", "agent_a1", "tool_mem", 2, T0 + timedelta(hours=2, minutes=1)),
        ("a1", "agent_a1", "tool_mem", 9, T0 + timedelta(hours=2, minutes=2)),  # expired below
        ("a2", "agent_a2", "text_mem", 3, T0 + timedelta(days=1)),
        ("a2", "agent_a2", "pref_mem", 10, T0 + timedelta(days=1, hours=1)),
        (None, "user_profile", "pref_mem", 8, T0 + timedelta(minutes=10)),
        ("a1", "user_profile", "pref_mem", 1, T0 + timedelta(hours=2, minutes=3)),
    ]
    stored = await provider.add(
        [
            NewMemory(
                tenant_id=tenant,
                user_id="u1",
                agent_id=agent,
                cube_id=cube,
                memory_type=kind,  # type: ignore[arg-type]
                content=f"memory {i} {kind}",
                importance=importance,
            )
            for i, (agent, cube, kind, importance, _) in enumerate(specs)
        ]
    )
    async with engine.begin() as conn:
        for item, (*_, at) in zip(stored, specs, strict=True):
            await conn.execute(
                update(long_term_memory)
                .where(long_term_memory.c.id == item.id)
                .values(created_at=at)
            )
    await provider.delete(tenant, [stored[4].id])
