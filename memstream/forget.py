"""Forgetting a user (``DELETE /v1/users/{user_id}/memories``) or one memory: recorded first
(``user_forget``), so every stage drops what the user said before it, then deleted in every
provider the tenant has used, with the user's changes, links and (``purge_history``) history.
Every step can be repeated, and each of its transactions runs again when it loses a deadlock
to a concurrent writer (a stage writing the user's memories). Why it works this way:
docs/design/forget.md."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import TopicPartition
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

from memstream.broker.clients import group_less_consumer, stop_consumer
from memstream.broker.offsets import high_watermarks
from memstream.broker.topics import partitions_of
from memstream.errors import ProviderUnavailable
from memstream.providers.builtin import history
from memstream.providers.router import ProviderRouter
from memstream.settings import Settings
from memstream.store.agents import Provider
from memstream.store.cache import RedisCache
from memstream.store.database import again_on_deadlock
from memstream.store.forgets import Ends, ForgetStore
from memstream.store.rebuilds import CacheRebuilds
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
from memstream_client.contract.topics import INPUT_TOPICS

log = logging.getLogger(__name__)

EXTERNAL: tuple[Provider, ...] = ("MEMOS", "MEM0")
_CHUNK = 5000  # rows per DELETE, so that no transaction holds many rows locked
_IN_LIST = 500  # conversation ids per IN (...) list


@dataclass(slots=True)
class Forgotten:
    """What forgetting a user removed: memory ids, and with the history purge, row counts."""

    deleted: list[str] = field(default_factory=list)
    messages: int = 0
    conversations: int = 0


async def input_ends(settings: Settings) -> Ends:
    """Where each partition of the input topics ends now (full topic names); raises
    ``ServiceUnavailable`` when the broker does not say."""
    tps = [
        TopicPartition(settings.topic(name), p)
        for name in INPUT_TOPICS
        for p in await partitions_of(settings, settings.topic(name))
    ]
    consumer = group_less_consumer(settings)
    await consumer.start()
    try:
        ends = await high_watermarks(consumer, tps)
    finally:
        await stop_consumer(consumer)
    out: Ends = {settings.topic(name): {} for name in INPUT_TOPICS}
    for tp, end in ends.items():
        out[tp.topic][tp.partition] = end
    return out


async def providers_used(engine: AsyncEngine, tenant_id: str) -> list[Provider]:
    """The external providers the tenant's agents are configured for, or that hold memories
    memstream wrote for the tenant."""
    configured = select(distinct(agent_config.c.long_memory_provider)).where(
        agent_config.c.tenant_id == tenant_id
    )
    written = select(distinct(provider_memory.c.provider)).where(
        provider_memory.c.tenant_id == tenant_id
    )
    async with engine.connect() as conn:
        names = set((await conn.execute(configured)).scalars())
        names |= set((await conn.execute(written)).scalars())
    return [name for name in EXTERNAL if name in names]


async def forget_memory(
    router: ProviderRouter, engine: AsyncEngine, tenant_id: str, memory_id: str
) -> list[str]:
    """Delete one memory wherever the tenant keeps memories: the built-in store and every
    provider its agents use or memstream wrote its memories to (an agent that switched
    provider left its memories where they were written). Answers the ids deleted; raises
    ``ProviderUnavailable`` when none was and a provider that may hold it did not answer."""
    deleted = await again_on_deadlock(
        lambda: router.builtin.delete(tenant_id, [memory_id], erase=True)
    )
    unreachable: list[str] = []
    for name in await providers_used(engine, tenant_id):
        try:
            deleted += await router.named(name).delete(tenant_id, [memory_id])
        except ProviderUnavailable as exc:
            unreachable.append(f"{name} ({exc})")
    if not deleted and unreachable:
        raise ProviderUnavailable(
            "the memory is in none of the providers that answered; not reached: "
            + ", ".join(unreachable)
        )
    return deleted


async def forget_user(
    router: ProviderRouter,
    engine: AsyncEngine,
    cache: RedisCache | None,
    tenant_id: str,
    user_id: str,
    *,
    ends: Ends,
    purge_history: bool = False,
) -> Forgotten:
    """Forget a user as the module docstring says, from the input topics' partition ends
    ``ends`` on (``input_ends``); answers what was removed."""
    # Recorded before anything goes: a stage that wrote without seeing it checks again once
    # its write is done, and takes back what this forget would have deleted.
    forgets = ForgetStore(engine)
    await again_on_deadlock(lambda: forgets.record(tenant_id, user_id, ends, purge=purge_history))
    out = Forgotten()
    unreachable = await erase_memories(router, engine, tenant_id, user_id, out)
    if purge_history:
        await _purge_history(engine, cache, tenant_id, user_id, out)
    if unreachable:
        raise ProviderUnavailable(
            "the user is forgotten everywhere but in " + ", ".join(unreachable)
            + "; call again once it answers"
        )  # fmt: skip
    return out


async def erase_memories(
    router: ProviderRouter, engine: AsyncEngine, tenant_id: str, user_id: str, out: Forgotten
) -> list[str]:
    """Every memory of the user in every provider, its text, changes and links (what a
    session a forget overtook wrote, too); answers the providers that could not be reached."""
    unreachable: list[str] = []
    for name in await providers_used(engine, tenant_id):
        try:
            out.deleted += await router.named(name).delete_user(tenant_id, user_id)
        except ProviderUnavailable as exc:
            unreachable.append(f"{name} ({exc})")
            continue
        ledger = provider_memory.c
        await _delete_all(
            engine,
            provider_memory,
            (ledger.tenant_id == tenant_id, ledger.provider == name, ledger.user_id == user_id),
        )
    out.deleted += await again_on_deadlock(lambda: router.builtin.delete_user(tenant_id, user_id))
    memories, vectors = long_term_memory.c, memory_embedding.c
    await _delete_all(
        engine, memory_embedding, (vectors.tenant_id == tenant_id, vectors.user_id == user_id)
    )
    terms = memory_term.c
    await _delete_all(engine, memory_term, (terms.tenant_id == tenant_id, terms.user_id == user_id))
    await again_on_deadlock(lambda: history.forget_turns(engine, tenant_id, user_id))
    await _delete_all(
        engine, long_term_memory, (memories.tenant_id == tenant_id, memories.user_id == user_id)
    )
    # The user's history goes with the user: every published change (a ``forgotten`` one is
    # deleted by the relay once out), and the links between memories. A change not yet out
    # still goes out, before the user's ``forgotten`` ones, so that a consumer ends where the
    # record does; its text is erased now, and the relay deletes it once published.
    changes, links = memory_change.c, memory_link.c
    user = (changes.tenant_id == tenant_id, changes.user_id == user_id)
    await _delete_all(engine, memory_change, (*user, changes.published_at.is_not(None)))
    unpublished = (
        update(memory_change)
        .where(*user, changes.published_at.is_(None), changes.content.is_not(None))
        .values(content=None)
    )
    await again_on_deadlock(lambda: _run(engine, unpublished))
    await _delete_all(engine, memory_link, (links.tenant_id == tenant_id, links.user_id == user_id))
    keys = memory_key.c  # the values of the user's keyed items (``memstream.keyed``)
    await _delete_all(engine, memory_key, (keys.tenant_id == tenant_id, keys.user_id == user_id))
    return unreachable


async def _purge_history(
    engine: AsyncEngine, cache: RedisCache | None, tenant_id: str, user_id: str, out: Forgotten
) -> None:
    messages = conversation_message.c
    query = select(distinct(messages.conversation_id)).where(
        messages.tenant_id == tenant_id, messages.user_id == user_id
    )
    async with engine.connect() as conn:
        conversations = sorted((await conn.execute(query)).scalars())
    out.conversations = len(conversations)
    out.messages = await _delete_all(
        engine, conversation_message, (messages.tenant_id == tenant_id, messages.user_id == user_id)
    )
    for start in range(0, len(conversations), _IN_LIST):
        chunk = conversations[start : start + _IN_LIST]
        for table in (conversation_summary, processed_mark):
            scope = (table.c.tenant_id == tenant_id, table.c.conversation_id.in_(chunk))
            await _delete_all(engine, table, scope)
    keys = [(tenant_id, c) for c in conversations]
    if cache is None or not keys:
        return
    try:
        await cache.forget(keys)
    except Exception as exc:
        log.warning("cache unreachable while purging %d conversations (%r); marked", len(keys), exc)
        await CacheRebuilds(engine).mark(keys)


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
