"""Process-wide resources built once from the settings: the database engine and the cache."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine
from memstream.store.messages import MessageStore
from memstream.store.rebuilds import CacheRebuilds

log = logging.getLogger(__name__)


@dataclass
class Resources:
    """The engine, stores and cache a worker or the API shares across its tasks."""

    settings: Settings
    engine: AsyncEngine
    messages: MessageStore
    cache: RedisCache | None

    @classmethod
    def open(cls, settings: Settings, *, pre_ping: bool = True) -> Resources:
        engine = create_engine(settings.database_url, pre_ping=pre_ping)
        cache = None
        if settings.cache_enabled:
            # A node that answers again first drops the keys marked while it failed.
            cache = RedisCache.from_settings(settings, rebuilds=CacheRebuilds(engine))
        else:
            log.warning("MEMSTREAM_REDIS_URL is empty: running without the hot cache")
        return cls(settings, engine, MessageStore(engine), cache)

    async def close(self) -> None:
        if self.cache is not None:
            await self.cache.close()
        await self.engine.dispose()
