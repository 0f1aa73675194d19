"""The load path: what an agent request waits on, short-term and long-term loaded in parallel.

Every part degrades instead of failing: a cache error reads the record, a slow or failing
long-term provider gives empty long-term memory, a missing summary is left out; each is named
in ``degraded``. Work is bounded: only ``context_rounds * 3`` messages are read, and token
counts come from ingestion, never re-tokenised here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

from sqlalchemy import text

from memstream import metrics
from memstream.api.models import (
    ContextItem,
    ContextMessage,
    ContextRequest,
    ContextResponse,
    LongTerm,
    TokenCounts,
)
from memstream.errors import ProviderUnavailable
from memstream.loadpath.budget import budget_long_term, prepare_items
from memstream.loadpath.window import Summary as WindowSummary
from memstream.loadpath.window import WindowMessage, build_window
from memstream.providers.base import LongTermProvider
from memstream.providers.router import ProviderRouter, provider_name
from memstream.runtime import Resources
from memstream.settings import Settings
from memstream.store.agents import (
    DEFAULT_CONTEXT_ROUNDS,
    AgentConfig,
)
from memstream.store.searchstats import SearchStats
from memstream.store.summaries import Summary, SummaryStore

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class _Degraded:
    parts: list[str] = field(default_factory=list)

    def add(self, part: str) -> None:
        if part not in self.parts:
            self.parts.append(part)
            metrics.DEGRADED.labels(part).inc()


class LoadPath:
    """Assembles ``/v1/context`` answers and owns the stores the API reads."""

    def __init__(self, settings: Settings, resources: Resources) -> None:
        self.settings = settings
        self.resources = resources
        self.router = ProviderRouter(
            resources.engine, settings, config_cache_seconds=settings.agent_config_cache_seconds
        )
        self.agents = self.router.agents
        self.summaries = SummaryStore(resources.engine)
        self._background: set[asyncio.Task[None]] = set()
        # Long-term searches per tenant and minute, flushed to ``search_stat`` in batches.
        self.search_stats = SearchStats(resources.engine)

    @classmethod
    def open(cls, settings: Settings) -> LoadPath:
        loadpath = cls(settings, Resources.open(settings))
        loadpath.search_stats.start()
        return loadpath

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self.search_stats.close()
        await self.router.close()
        await self.resources.close()

    # -- routing -----------------------------------------------------------------------------

    async def config(self, tenant_id: str, agent_id: str | None) -> AgentConfig | None:
        return await self.router.config(tenant_id, agent_id)

    async def provider_for(self, tenant_id: str, agent_id: str | None) -> LongTermProvider:
        return await self.router.for_agent(tenant_id, agent_id)

    async def tenant_providers(self, tenant_id: str) -> list[LongTermProvider]:
        return await self.router.for_tenant(tenant_id)

    # -- /v1/context -------------------------------------------------------------------------

    async def context(self, req: ContextRequest) -> ContextResponse:
        started = time.perf_counter()
        degraded = _Degraded()
        try:
            config = await self.config(req.tenant_id, req.agent_id)
        except Exception as exc:
            log.warning("agent config unreadable (%r); defaults apply", exc)
            config = None
            degraded.add("config")
        rounds = req.context_rounds or (config.context_rounds if config else DEFAULT_CONTEXT_ROUNDS)
        no_messages: tuple[list[ContextMessage], int] = ([], 0)
        short, long = await asyncio.gather(
            self._timed(
                "short_term",
                self.settings.short_term_timeout_seconds,
                lambda: self._short_term(req, rounds, degraded),
                default=no_messages,
                degraded=degraded,
            ),
            self._timed(
                "long_term",
                self.settings.long_term_timeout_seconds,
                lambda: self._long_term(req, config, degraded),
                default=(LongTerm(provider=provider_name(config)), 0, 0),
                degraded=degraded,
            ),
        )
        messages, message_tokens = short
        long_term, profile_tokens, agent_tokens = long
        metrics.LOAD_SECONDS.labels("total").observe(time.perf_counter() - started)
        return ContextResponse(
            conversation_id=req.conversation_id,
            messages=messages,
            long_term=long_term,
            tokens=TokenCounts(
                messages=message_tokens, user_profile=profile_tokens, agent_memory=agent_tokens
            ),
            degraded=degraded.parts,
        )

    async def _timed(
        self,
        path: str,
        within: float,
        run: Callable[[], Awaitable[T]],
        *,
        default: T,
        degraded: _Degraded,
    ) -> T:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(within):
                return await run()
        except TimeoutError:
            log.warning("%s path timed out after %.2fs", path, within)
        except Exception as exc:
            log.warning("%s path failed: %r", path, exc)
        finally:
            metrics.LOAD_SECONDS.labels(path).observe(time.perf_counter() - started)
        degraded.add(path)
        return default

    async def _short_term(
        self, req: ContextRequest, rounds: int, degraded: _Degraded
    ) -> tuple[list[ContextMessage], int]:
        limit = rounds * 3
        recent, summary = await asyncio.gather(
            self._recent(req.tenant_id, req.conversation_id, limit, degraded),
            self._summary(req.tenant_id, req.conversation_id, degraded),
        )
        window = build_window(
            recent,
            WindowSummary(summary.text, summary.token_count) if summary else None,
            max_tokens=self.settings.window_max_tokens,
            summary_budget=self.settings.summary_budget_tokens,
        )
        out = [
            ContextMessage(role=m.role, content=m.content, tokens=m.tokens, summary=m.summary)
            for m in window.messages
        ]
        return out, window.tokens

    async def _recent(
        self, tenant_id: str, conversation_id: str, limit: int, degraded: _Degraded
    ) -> Sequence[WindowMessage]:
        cache = self.resources.cache
        if cache is not None:
            try:
                cached = await cache.recent(tenant_id, conversation_id, limit)
            except Exception as exc:
                log.warning("cache read failed: %r", exc)
                metrics.CACHE.labels("read", "error").inc()
                degraded.add("cache")
                cached = None
            else:
                metrics.CACHE.labels("read", "hit" if cached is not None else "miss").inc()
                if cached is not None:
                    return cached
                self._rewarm(tenant_id, conversation_id)
        return await self.resources.messages.recent(tenant_id, conversation_id, limit)

    def _rewarm(self, tenant_id: str, conversation_id: str) -> None:
        """Rebuild a missing cache key from the record, off the request's path."""

        async def run() -> None:
            cache = self.resources.cache
            assert cache is not None
            try:
                conv = (tenant_id, conversation_id)
                found = await self.resources.messages.recent_many([conv], cache.max_messages)
                await cache.warm(found)
            except Exception as exc:
                log.warning("cache re-warm failed: %r", exc)

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _summary(
        self, tenant_id: str, conversation_id: str, degraded: _Degraded
    ) -> Summary | None:
        cache = self.resources.cache
        if cache is not None:
            try:
                cached = await cache.cached_summary(tenant_id, conversation_id)
                if cached is not None:
                    return Summary(*cached) if cached[0] else None
            except Exception:
                degraded.add("cache")
        try:
            summary = await self.summaries.get(tenant_id, conversation_id)
        except Exception as exc:
            log.warning("summary unreadable: %r", exc)
            degraded.add("summary")
            return None
        if cache is not None:
            # Cache absence too, so conversations without a summary cost no query either.
            text_, tokens = (summary.text, summary.token_count) if summary else ("", 0)
            try:
                await cache.cache_summary(
                    tenant_id,
                    conversation_id,
                    text_,
                    tokens,
                    self.settings.summary_cache_ttl_seconds,
                )
            except Exception:
                degraded.add("cache")
        return summary

    async def _long_term(
        self, req: ContextRequest, config: AgentConfig | None, degraded: _Degraded
    ) -> tuple[LongTerm, int, int]:
        name = provider_name(config)
        if config is not None and (not config.open_long_memory or not config.model_target_id):
            # Long-term memory off for this agent, or no model bound: no query at all.
            return LongTerm(provider=None), 0, 0
        if not req.query.strip():
            return LongTerm(provider=name), 0, 0
        try:
            provider = self.router.named(name)
        except ProviderUnavailable:
            degraded.add("long_term")
            return LongTerm(provider=name), 0, 0
        searched = time.perf_counter()
        found = await provider.search(
            req.tenant_id,
            req.user_id,
            req.agent_id,
            req.query,
            top_k=self.settings.long_term_top_k,
        )
        self.search_stats.record(req.tenant_id, time.perf_counter() - searched, len(found))
        groups = prepare_items(found, filter_sensitive=req.filter_sensitive)
        budget = budget_long_term(
            [m.content for m in groups.user_profile],
            [m.content for m in groups.agent],
            total=self.settings.long_term_budget_tokens,
            profile_share=self.settings.user_profile_share,
        )
        # Report the items that made it into the texts, best first.
        used = (
            groups.user_profile[: budget.user_profile_items]
            + groups.agent[: budget.agent_memory_items]
        )
        items = [
            ContextItem(
                id=m.id,
                cube_id=m.cube_id,
                memory_type=m.memory_type,
                content=m.content,
                score=round(m.score, 4),
            )
            for m in sorted(used, key=lambda m: m.score, reverse=True)
        ]
        long_term = LongTerm(
            provider=name,
            user_profile=budget.user_profile,
            agent_memory=budget.agent_memory,
            items=items,
        )
        return long_term, budget.user_profile_tokens, budget.agent_memory_tokens

    # -- /readyz -----------------------------------------------------------------------------

    async def readiness(self) -> dict[str, str]:
        async def database() -> str:
            async with self.resources.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return "ok"

        async def cache() -> str:
            if self.resources.cache is None:
                return "disabled"
            await self.resources.cache.ping()
            return "ok"

        async def broker() -> str:
            host, _, port = self.settings.kafka_bootstrap_servers.split(",")[0].rpartition(":")
            _, writer = await asyncio.open_connection(urlsplit(f"//{host}").hostname, int(port))
            writer.close()
            return "ok"

        checks = {"database": database, "cache": cache, "broker": broker}
        results = {}
        for name, check in checks.items():
            try:
                async with asyncio.timeout(2):
                    results[name] = await check()
            except Exception as exc:
                results[name] = f"error: {exc.__class__.__name__}"
        return results
