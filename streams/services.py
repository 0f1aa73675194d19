"""The services a worker's stages use (the database and cache, the providers, the LLM, the
forget records), built once per process on first use."""

from __future__ import annotations

from functools import cache

from memstream import metrics
from memstream.events.origin import Origin
from memstream.forget import Forgotten, erase_memories
from memstream.llm import LLMClient
from memstream.providers.router import ProviderRouter
from memstream.runtime import Resources
from memstream.store.forgets import ForgetSet, ForgetStore
from memstream.store.marks import MarkStore
from memstream.store.summaries import SummaryStore
from memstream.streams.app import settings


@cache
def resources() -> Resources:
    return Resources.open(settings)


@cache
def router() -> ProviderRouter:
    return ProviderRouter(
        resources().engine, settings, config_cache_seconds=settings.agent_config_cache_seconds
    )


@cache
def marks() -> MarkStore:
    return MarkStore(resources().engine)


@cache
def summaries() -> SummaryStore:
    return SummaryStore(resources().engine)


@cache
def forgets() -> ForgetSet:
    """This worker's copy of the forget records (``memstream.store.forgets``)."""
    return ForgetSet(ForgetStore(resources().engine), settings.forget_refresh_seconds)


async def forgotten_before(tenant_id: str, user_id: str, origin: Origin | None) -> bool:
    """Whether the user was forgotten after the public record at ``origin`` was sent."""
    await forgets().refresh()
    return forgets().before(tenant_id, user_id, origin)


async def overtaken(tenant_id: str, user_id: str, origin: Origin | None, stage: str) -> bool:
    """After a write of the user's memories: whether a forget began after the record at
    ``origin`` was sent, seen now, in which case what the write added is taken back."""
    await forgets().refresh(fresh=True)
    if not forgets().before(tenant_id, user_id, origin):
        return False
    await erase_memories(router(), resources().engine, tenant_id, user_id, Forgotten())
    metrics.EVENTS.labels(stage, "taken_back_forgotten").inc()
    return True


@cache
def llm() -> LLMClient | None:
    return LLMClient.from_settings(settings)
