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

from memstream import metrics
from memstream.errors import ProviderUnavailable
from memstream.loadpath.budget import budget_long_term, prepare_items
from memstream.loadpath.models import (
    ContextItem,
    ContextMessage,
    ContextRequest,
    ContextResponse,
    LongTerm,
    TokenCounts,
)
from memstream.loadpath.window import Summary as WindowSummary
from memstream.loadpath.window import WindowMessage, build_window
from memstream.providers.router import ProviderRouter, provider_name
from memstream.settings import Settings
from memstream.store.agents import DEFAULT_CONTEXT_ROUNDS, AgentConfig
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore
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
    """Assembles ``/v1/context`` answers from the record, the cache and the long-term providers.

    It is handed its collaborators and closes none of them: whoever built them owns them.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        messages: MessageStore,
        summaries: SummaryStore,
        cache: RedisCache | None,
        router: ProviderRouter,
        search_stats: SearchStats,
    ) -> None:
        self._settings = settings
        self._messages = messages
        self._summaries = summaries
        self._cache = cache
        self._router = router
        # Long-term searches per tenant and minute, flushed to ``search_stat`` in batches.
        self._search_stats = search_stats
        self._background: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Cancel the cache re-warms still running."""
        for task in list(self._background):
            task.cancel()

    async def context(self, req: ContextRequest) -> ContextResponse:
        started = time.perf_counter()
        degraded = _Degraded()
        try:
            config = await self._router.config(req.tenant_id, req.agent_id)
        except Exception as exc:
            log.warning("agent config unreadable (%r); defaults apply", exc)
            config = None
            degraded.add("config")
        rounds = req.context_rounds or (config.context_rounds if config else DEFAULT_CONTEXT_ROUNDS)
        no_messages: tuple[list[ContextMessage], int] = ([], 0)
        short, long = await asyncio.gather(
            self._timed(
                "short_term",
                self._settings.short_term_timeout_seconds,
                lambda: self._short_term(req, rounds, degraded),
                default=no_messages,
                degraded=degraded,
            ),
            self._timed(
                "long_term",
                self._settings.long_term_timeout_seconds,
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
            max_tokens=self._settings.window_max_tokens,
            summary_budget=self._settings.summary_budget_tokens,
        )
        out = [ContextMessage.model_validate(m, from_attributes=True) for m in window.messages]
        return out, window.tokens

    async def _recent(
        self, tenant_id: str, conversation_id: str, limit: int, degraded: _Degraded
    ) -> Sequence[WindowMessage]:
        cache = self._cache
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
        return await self._messages.recent(tenant_id, conversation_id, limit)

    def _rewarm(self, tenant_id: str, conversation_id: str) -> None:
        """Rebuild a missing cache key from the record, off the request's path."""

        async def run() -> None:
            cache = self._cache
            assert cache is not None
            try:
                conv = (tenant_id, conversation_id)
                found = await self._messages.recent_many([conv], cache.max_messages)
                await cache.warm(found)
            except Exception as exc:
                log.warning("cache re-warm failed: %r", exc)

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _summary(
        self, tenant_id: str, conversation_id: str, degraded: _Degraded
    ) -> Summary | None:
        cache = self._cache
        if cache is not None:
            try:
                cached = await cache.cached_summary(tenant_id, conversation_id)
                if cached is not None:
                    return Summary(*cached) if cached[0] else None
            except Exception:
                degraded.add("cache")
        try:
            summary = await self._summaries.get(tenant_id, conversation_id)
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
                    self._settings.summary_cache_ttl_seconds,
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
            provider = self._router.named(name)
        except ProviderUnavailable:
            degraded.add("long_term")
            return LongTerm(provider=name), 0, 0
        searched = time.perf_counter()
        found = await provider.search(
            req.tenant_id,
            req.user_id,
            req.agent_id,
            req.query,
            top_k=self._settings.long_term_top_k,
        )
        self._search_stats.record(req.tenant_id, time.perf_counter() - searched, len(found))
        groups = prepare_items(found, filter_sensitive=req.filter_sensitive)
        budget = budget_long_term(
            [m.content for m in groups.user_profile],
            [m.content for m in groups.agent],
            total=self._settings.long_term_budget_tokens,
            profile_share=self._settings.user_profile_share,
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
