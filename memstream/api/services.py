"""What the API's routes work with, built once per process and handed to them by FastAPI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.loadpath.assemble import LoadPath
from memstream.providers.router import ProviderRouter
from memstream.runtime import Resources
from memstream.settings import Settings
from memstream.store.agents import AgentConfigStore
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine
from memstream.store.messages import MessageStore
from memstream.store.reads import Reads, ReplicaLag
from memstream.store.searchstats import SearchStats
from memstream.store.summaries import SummaryStore


@dataclass(frozen=True, slots=True)
class Services:
    """The engine, stores, cache, provider router and load path of one API process."""

    settings: Settings
    engine: AsyncEngine
    # The read replica's engine (the primary's when there is none), and what picks between
    # them for a user's long-term memories (``memstream.store.reads``).
    reader: AsyncEngine
    reads: Reads
    messages: MessageStore
    read_messages: MessageStore
    cache: RedisCache | None
    router: ProviderRouter
    agents: AgentConfigStore
    search_stats: SearchStats
    loadpath: LoadPath

    @classmethod
    def open(cls, settings: Settings) -> Services:
        """Build every service and start the search statistics flusher (needs a running loop)."""
        # No pre-ping: it is a database round trip on every request's every checkout. A
        # connection the server dropped fails one call (the load path degrades, the pool is
        # invalidated) and connections are recycled well before MySQL's idle timeout.
        resources = Resources.open(settings, pre_ping=False)
        engine, cache = resources.engine, resources.cache
        # Reads go through an engine of their own, in autocommit: a connection goes back to
        # the pool without a ROLLBACK round trip (the replica's, or the primary's own; SQLite
        # has no round trip to save, and an in-memory database no second engine).
        replicated = bool(settings.database_read_url.strip())
        reader = engine
        if replicated or engine.dialect.name != "sqlite":
            url = settings.database_read_url if replicated else settings.database_url
            reader = create_engine(url, pre_ping=False, read_only=True)
        lag = None
        if replicated and settings.database_read_lag_check_seconds > 0:
            lag = ReplicaLag(
                reader,
                max_seconds=settings.database_read_max_lag_seconds,
                every=settings.database_read_lag_check_seconds,
            )
        reads = Reads(
            engine,
            reader,
            sticky_seconds=settings.database_read_sticky_seconds,
            lag=lag,
            replicated=replicated,
        )
        router = ProviderRouter(
            engine, settings, config_cache_seconds=settings.agent_config_cache_seconds, reads=reads
        )
        search_stats = SearchStats(engine)
        # The record's turns and summaries come from the replica; a missing cache key is
        # re-warmed from the primary, so that a lagging replica never fills the cache.
        loadpath = LoadPath(
            settings,
            engine=reader,
            messages=resources.messages,
            summaries=SummaryStore(reader),
            cache=cache,
            router=router,
            search_stats=search_stats,
        )
        search_stats.start()
        if lag is not None:
            lag.start()
        return cls(
            settings=settings,
            engine=engine,
            reader=reader,
            reads=reads,
            messages=resources.messages,
            read_messages=MessageStore(reader),
            cache=cache,
            router=router,
            agents=router.agents,
            search_stats=search_stats,
            loadpath=loadpath,
        )

    def message_reads(self) -> MessageStore:
        """The message store that answers a read now: the replica's unless it lags."""
        return self.read_messages if self.reads.current() is self.reader else self.messages

    async def close(self) -> None:
        """Stop what uses the engine and cache first (the last search statistics are written
        through the engine), then close them."""
        if self.reads.lag is not None:
            await self.reads.lag.close()
        await self.loadpath.close()
        await self.search_stats.close()
        await self.router.close()
        if self.cache is not None:
            await self.cache.close()
        await self.engine.dispose()
        if self.reader is not self.engine:
            await self.reader.dispose()


async def _services(request: Request) -> Services:
    # Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a thread
    # hand-off on every request.
    services: Services = request.app.state.services
    return services


# The one way a route reaches the services: a parameter of this type, so what a route uses is
# in its signature and ``app.state`` is read in one place.
ServicesDep = Annotated[Services, Depends(_services)]
