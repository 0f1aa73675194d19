"""The load path: what an agent request waits on, short-term and long-term loaded in parallel.

Every part degrades instead of failing: a cache error reads the record, a slow or failing
long-term provider gives empty long-term memory, a missing summary is left out, an unreadable
agent config gives the defaults; each is named in ``degraded``. Each part's time limit counts
from the request's start, the agent-config read included, so a sick database costs at most the
longer limit. Work is bounded: only ``context_rounds * 3`` chat turns are read, and token counts
come from ingestion, never re-tokenised here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import metrics, tracing
from memstream.errors import CacheUnavailable, ProviderUnavailable
from memstream.loadpath.budget import budget_long_term, memory_line, prepare_items
from memstream.loadpath.recent import Recent, RecentTurns
from memstream.loadpath.window import Summary, build_window
from memstream.providers import degraded as provider_degraded
from memstream.providers.router import ProviderRouter, provider_name
from memstream.settings import Settings
from memstream.store.agents import AgentConfig, long_term_enabled
from memstream.store.cache import RedisCache
from memstream.store.messages import MessageStore
from memstream.store.owners import foreign_conversation
from memstream.store.searchstats import SearchStats
from memstream.store.summaries import SummaryStore
from memstream_client.contract.api import (
    DEFAULT_CONTEXT_ROUNDS,
    ContextItem,
    ContextMessage,
    ContextRequest,
    ContextResponse,
    LongTerm,
    TokenCounts,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Shares of the short-term time limit: the agent config must be read within the first, so a
# database that hangs leaves the cache time to answer the turns; a summary read from the record
# is given up at the second, so the window still comes without it.
CONFIG_SHARE = 0.4
SUMMARY_SHARE = 0.8
# The cache is given up by this share at the latest (and by its own read budget before), so a
# slow or failing cache leaves the record read at least the rest.
CACHE_SHARE = 0.5
CONFIG_REFRESH_SECONDS = 5.0  # a background config read that takes longer is given up


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
        engine: AsyncEngine,
        messages: MessageStore,
        summaries: SummaryStore,
        cache: RedisCache | None,
        router: ProviderRouter,
        search_stats: SearchStats,
    ) -> None:
        self._settings = settings
        self._summaries = summaries
        self._cache = cache
        self._router = router
        self._turns = RecentTurns(engine, messages, cache)
        self._primary = messages.engine
        self._refreshing: dict[tuple[str, str], asyncio.Task[None]] = {}
        # Long-term searches per tenant and minute, flushed to ``search_stat`` in batches.
        self._search_stats = search_stats

    async def close(self) -> None:
        """Cancel the cache re-warms and config refreshes still running."""
        await self._turns.close()
        for task in list(self._refreshing.values()):
            task.cancel()

    async def context(
        self, req: ContextRequest, *, arrived: float | None = None, with_long_term: bool = True
    ) -> ContextResponse:
        """The answer; the time limits count from ``arrived`` (the loop's clock) when the
        request waited before it got here. Without ``with_long_term`` (an overloaded process) the
        long-term part is not searched and ``degraded`` names it. Traced as ``assemble``, with
        the degraded parts and token counts (``memstream.tracing``)."""
        who = tracing.who(req.tenant_id, req.agent_id, req.user_id)
        with tracing.parent_span("assemble", **who) as part:
            answer = await self._context(req, arrived, with_long_term)
            part.set(degraded=answer.degraded, **tracing.tokens(answer.tokens))
        return answer

    async def _context(
        self, req: ContextRequest, arrived: float | None, with_long_term: bool
    ) -> ContextResponse:
        started = time.perf_counter()
        begun = asyncio.get_running_loop().time() if arrived is None else arrived
        settings = self._settings
        degraded = _Degraded()
        config = await self._config(req, begun, degraded)
        if req.context_rounds is not None:
            rounds = req.context_rounds
        else:
            rounds = config.context_rounds if config else DEFAULT_CONTEXT_ROUNDS
        no_messages: tuple[list[ContextMessage], int] = ([], 0)
        short, long = await asyncio.gather(
            self._timed(
                "short_term",
                begun + settings.short_term_timeout_seconds,
                lambda: self._short_term(req, rounds, begun, degraded),
                default=no_messages,
                degraded=degraded,
            ),
            self._timed(
                "long_term",
                begun + settings.long_term_timeout_seconds,
                lambda: self._long_term(req, config, degraded),
                default=(LongTerm(provider=provider_name(config)), 0, 0),
                degraded=degraded,
            )
            if with_long_term
            else self._skipped(req, config, degraded),
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

    async def _skipped(
        self, req: ContextRequest, config: AgentConfig | None, degraded: _Degraded
    ) -> tuple[LongTerm, int, int]:
        """The long-term part not searched, as when it runs out of time (a part that would
        not have been searched anyway is not degraded)."""
        if not long_term_enabled(config):
            return LongTerm(provider=None), 0, 0
        if req.query.strip():
            degraded.add("long_term")
        return LongTerm(provider=provider_name(config)), 0, 0

    async def _config(
        self, req: ContextRequest, begun: float, degraded: _Degraded
    ) -> AgentConfig | None:
        """The agent's config. One read within ``agent_config_cache_seconds`` serves as it is;
        an older one serves while a fresh one is read in the background, so a request waits
        for the database only the first time it meets an agent (or with no caching). That
        read must finish early within both paths' time limits; when it cannot, the config
        read last (a sick database must not switch an agent's long-term memory on) or the
        defaults apply."""
        tenant_id, agent_id = req.tenant_id, req.agent_id
        ttl = self._settings.agent_config_cache_seconds
        try:
            known, age = self._router.known_config(tenant_id, agent_id)
        except LookupError:
            known, age = None, None
        if age is not None and age < ttl:
            return known
        if age is not None and ttl > 0:
            self._refresh_config(tenant_id, agent_id)
            return known
        settings = self._settings
        limit = min(settings.short_term_timeout_seconds, settings.long_term_timeout_seconds)
        try:
            async with asyncio.timeout_at(begun + CONFIG_SHARE * limit):
                return await self._router.config(tenant_id, agent_id)
        except Exception as exc:
            log.warning("agent config unreadable (%r); the last one read or the defaults", exc)
            degraded.add("config")
        return known

    def _refresh_config(self, tenant_id: str, agent_id: str | None) -> None:
        """Read an agent's config again off the request's path, once at a time."""
        key = (tenant_id, agent_id or "")
        if key in self._refreshing:
            return

        async def run() -> None:
            try:
                async with asyncio.timeout(CONFIG_REFRESH_SECONDS):
                    await self._router.config(tenant_id, agent_id)
            except Exception as exc:
                log.warning("agent config refresh failed: %r", exc)
            finally:
                self._refreshing.pop(key, None)

        self._refreshing[key] = asyncio.create_task(run())

    async def _timed(
        self,
        path: str,
        deadline: float,
        run: Callable[[], Awaitable[T]],
        *,
        default: T,
        degraded: _Degraded,
    ) -> T:
        started = time.perf_counter()
        try:
            async with asyncio.timeout_at(deadline):
                return await run()
        except TimeoutError:
            log.warning("%s path ran out of time", path)
        except Exception as exc:
            log.warning("%s path failed: %r", path, exc)
        finally:
            metrics.LOAD_SECONDS.labels(path).observe(time.perf_counter() - started)
        degraded.add(path)
        return default

    async def _short_term(
        self, req: ContextRequest, rounds: int, begun: float, degraded: _Degraded
    ) -> tuple[list[ContextMessage], int]:
        if req.own_conversation and await foreign_conversation(
            self._primary, req.tenant_id, req.conversation_id, req.user_id
        ):
            # On the primary: the cache may hold a message the replica has not yet.
            return [], 0
        summary_by = begun + SUMMARY_SHARE * self._settings.short_term_timeout_seconds
        recent, summary = await self._read(
            req.tenant_id, req.conversation_id, rounds * 3, begun, summary_by, degraded
        )
        window = build_window(
            recent.turns,
            summary,
            max_tokens=self._settings.window_max_tokens,
            summary_budget=self._settings.summary_budget_tokens,
            earlier=recent.earlier,
        )
        # Keyword construction: pydantic-core validates four plain fields faster than
        # ``model_construct`` skips them, and far faster than reading attributes.
        out = [
            ContextMessage(role=e.role, content=e.content, tokens=e.tokens, summary=e.summary)
            for e in window.messages
        ]
        return out, window.tokens

    async def _read(
        self,
        tenant_id: str,
        conversation_id: str,
        limit: int,
        begun: float,
        summary_by: float,
        degraded: _Degraded,
    ) -> tuple[Recent, Summary | None]:
        """The newest ``limit`` turns and the summary: from the cache in one round trip when
        it has both, the rest from the record."""
        recent: Recent | None = None
        cached: tuple[str, int] | None = None
        if self._cache is not None:
            settings = self._settings
            cache_by = min(
                asyncio.get_running_loop().time() + settings.cache_read_budget_seconds,
                begun + CACHE_SHARE * settings.short_term_timeout_seconds,
            )
            try:
                with tracing.span("cache read") as part:
                    recent, cached = await self._turns.from_cache(
                        tenant_id, conversation_id, limit, cache_by
                    )
                    part.set(hit=recent is not None)
            except CacheUnavailable as exc:
                # Counted and logged once by the cache's breaker; each request says so.
                log.debug("cache read failed: %r", exc)
                metrics.CACHE.labels("read", "error").inc()
                degraded.add("cache")
            except Exception as exc:
                log.warning("cache read failed: %r", exc)
                metrics.CACHE.labels("read", "error").inc()
                degraded.add("cache")
        if cached is None:
            if recent is not None:
                return recent, await self._summary(tenant_id, conversation_id, summary_by, degraded)
            return await asyncio.gather(
                self._from_record(tenant_id, conversation_id, limit),
                self._summary(tenant_id, conversation_id, summary_by, degraded),
            )
        # ("", 0) is a cached "no summary", so conversations without one cost no query.
        summary = Summary(*cached) if cached[0] else None
        if recent is None:
            recent = await self._from_record(tenant_id, conversation_id, limit)
        return recent, summary

    async def _from_record(self, tenant_id: str, conversation_id: str, limit: int) -> Recent:
        with tracing.span("record read", limit=limit) as part:
            recent = await self._turns.from_record(tenant_id, conversation_id, limit)
            part.set(turns=len(recent.turns))
        return recent

    async def _summary(
        self, tenant_id: str, conversation_id: str, by: float, degraded: _Degraded
    ) -> Summary | None:
        """The summary from the record by ``by`` (the window without it beats no window),
        then cached (its absence too)."""
        try:
            async with asyncio.timeout_at(by):
                stored = await self._summaries.get(tenant_id, conversation_id)
        except Exception as exc:
            log.warning("summary unreadable: %r", exc)
            degraded.add("summary")
            return None
        cache = self._cache
        if cache is not None:
            text_, tokens = (stored.text, stored.token_count) if stored else ("", 0)
            loop_now = asyncio.get_running_loop().time()
            try:
                await cache.cache_summary(
                    tenant_id,
                    conversation_id,
                    text_,
                    tokens,
                    self._settings.summary_cache_ttl_seconds,
                    deadline=loop_now + self._settings.cache_read_budget_seconds,
                )
            except Exception:
                degraded.add("cache")
        return Summary(stored.text, stored.token_count) if stored else None

    async def _long_term(
        self, req: ContextRequest, config: AgentConfig | None, degraded: _Degraded
    ) -> tuple[LongTerm, int, int]:
        name = provider_name(config)
        if not long_term_enabled(config):
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
        searching = tracing.span(f"long-term search {name}", provider=name)
        with searching as traced, provider_degraded.collect() as fell_back:  # e.g. "embeddings"
            found = await provider.search(
                req.tenant_id,
                req.user_id,
                req.agent_id,
                req.query,
                top_k=self._settings.long_term_top_k,
            )
            traced.set(items=len(found), degraded=list(fell_back) or None)
        for part in fell_back:
            degraded.add(part)
        self._search_stats.record(req.tenant_id, time.perf_counter() - searched, len(found))
        groups = prepare_items(found, filter_sensitive=req.filter_sensitive)
        facts = [m for m in groups.user_profile if m.kind != "episode"]
        episodes = [m for m in groups.user_profile if m.kind == "episode"]
        budget = budget_long_term(
            [memory_line(m) for m in facts],
            [memory_line(m) for m in groups.agent],
            episodes=[memory_line(m) for m in episodes],
            total=self._settings.long_term_budget_tokens,
            profile_share=self._settings.user_profile_share,
            fact_share=self._settings.user_profile_fact_share,
        )
        # Report the items that made it into the texts, best first.
        used = (
            facts[: budget.user_profile_items]
            + episodes[: budget.user_profile_episodes]
            + list(groups.agent[: budget.agent_memory_items])
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
