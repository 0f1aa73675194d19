"""Forgetting a user (``DELETE /v1/users/{user_id}/memories``) or one memory: recorded first
(``user_forget``), so every stage drops what the user said before it, then deleted in every
provider the tenant has used, with the user's changes, links and (``purge_history``) history.
Every step can be repeated, and each of its transactions runs again when it loses a deadlock
to a concurrent writer (a stage writing the user's memories). Why it works this way:
docs/design/forget.md."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.clients import group_less_consumer, stop_consumer
from memstream.broker.offsets import high_watermarks
from memstream.broker.topics import partitions_of
from memstream.errors import ProviderUnavailable
from memstream.providers.router import ProviderRouter
from memstream.settings import BrokerSettings
from memstream.store import erasure
from memstream.store.agents import Provider
from memstream.store.cache import RedisCache
from memstream.store.database import again_on_deadlock
from memstream.store.forgets import Ends, ForgetStore
from memstream.store.rebuilds import CacheRebuilds
from memstream_client.contract.topics import INPUT_TOPICS

log = logging.getLogger(__name__)

EXTERNAL: tuple[Provider, ...] = ("MEMOS", "MEM0")


@dataclass(slots=True)
class Forgotten:
    """What forgetting a user removed: memory ids, and with the history purge, row counts."""

    deleted: list[str] = field(default_factory=list)
    messages: int = 0
    conversations: int = 0


async def input_ends(settings: BrokerSettings) -> Ends:
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
    names = await erasure.providers_named(engine, tenant_id)
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
        await erasure.erase_ledger(engine, tenant_id, name, user_id)
    out.deleted += await again_on_deadlock(lambda: router.builtin.delete_user(tenant_id, user_id))
    await erasure.erase_memory_rows(engine, tenant_id, user_id)
    return unreachable


async def _purge_history(
    engine: AsyncEngine, cache: RedisCache | None, tenant_id: str, user_id: str, out: Forgotten
) -> None:
    conversations = await erasure.conversations_of(engine, tenant_id, user_id)
    out.conversations = len(conversations)
    out.messages = await erasure.erase_history(engine, tenant_id, user_id, conversations)
    keys = [(tenant_id, c) for c in conversations]
    if cache is None or not keys:
        return
    try:
        await cache.forget(keys)
    except Exception as exc:
        log.warning("cache unreachable while purging %d conversations (%r); marked", len(keys), exc)
        await CacheRebuilds(engine).mark(keys)
