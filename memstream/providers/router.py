"""Which long-term provider serves an agent (DESIGN "Long-term memory", routing).

The built-in store (``MYSQL``) always exists. MemOS and Mem0 exist when their URL is set
(``MEMSTREAM_MEMOS_URL``, ``MEMSTREAM_MEM0_URL``); an agent configured for one that is not
set gets ``ProviderUnavailable`` (on the load path: empty long-term memory, ``degraded``),
never a silent switch to another store. Writes to them are recorded in the ledger
(``memstream.store.ledger``), so the operations views count what lives there too.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.embeddings.client import EmbeddingClient
from memstream.errors import ProviderUnavailable
from memstream.providers.base import LongTermProvider
from memstream.providers.builtin import BuiltinProvider
from memstream.providers.ledgered import Ledgered
from memstream.providers.mem0 import Mem0Provider
from memstream.providers.memos import MemOSProvider
from memstream.store.agents import AgentConfig, AgentConfigStore, Provider
from memstream.store.ledger import ProviderLedger
from memstream.store.outbox import DEFAULT_TOPIC, ChangeOutbox
from memstream.store.reads import Reads
from memstream_client.contract.topics import MEMORY_CHANGED

if TYPE_CHECKING:
    from memstream.settings import Settings

log = logging.getLogger(__name__)

_SETTING = {"MEMOS": "MEMSTREAM_MEMOS_URL", "MEM0": "MEMSTREAM_MEM0_URL"}


class ProviderRouter:
    """Agent configs (cached briefly) and the provider each one names."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings | None = None,
        *,
        config_cache_seconds: float = 5.0,
        reads: Reads | None = None,
    ) -> None:
        self._engine = engine
        self.agents = AgentConfigStore(engine)
        # Every provider records its changes for this deployment's memory-changed topic.
        self.changes = ChangeOutbox(settings.topic(MEMORY_CHANGED) if settings else DEFAULT_TOPIC)
        if settings is None:
            self.builtin = BuiltinProvider(engine, changes=self.changes)
        else:
            self.builtin = BuiltinProvider(
                engine,
                changes=self.changes,
                embedder=EmbeddingClient.from_settings(settings),
                # Half the long-term part's time limit: a slow endpoint leaves the other half
                # for the lexical answer.
                query_timeout=settings.long_term_timeout_seconds / 2,
                fresh_seconds=settings.long_term_fresh_seconds,
                reads=reads,
                search_history=settings.search_history,
                warm_memories=settings.long_term_warm_memories,
                warm_after=settings.long_term_warm_after,
            )
        self._ttl = config_cache_seconds
        self._configs: dict[tuple[str, str], tuple[float, AgentConfig | None]] = {}
        self.memos: MemOSProvider | None = None
        self.mem0: Mem0Provider | None = None
        if settings is not None and settings.memos_url.strip():
            self.memos = MemOSProvider(
                settings.memos_url,
                settings.memos_api_key.get_secret_value(),
                agents_of=self.tenant_agent_ids,
            )
        if settings is not None and settings.mem0_url.strip():
            self.mem0 = Mem0Provider(settings.mem0_url, settings.mem0_api_key.get_secret_value())
        self.ledger = ProviderLedger(engine)
        self._external: dict[str, LongTermProvider] = {
            p.name: Ledgered(p, self.ledger, self.changes)
            for p in (self.memos, self.mem0)
            if p is not None
        }

    async def close(self) -> None:
        """Close the providers' HTTP clients (the built-in store's embeddings client too)."""
        await self.builtin.aclose()
        for provider in (self.memos, self.mem0):
            if provider is not None:
                await provider.aclose()

    async def config(self, tenant_id: str, agent_id: str | None) -> AgentConfig | None:
        """The agent's configuration (None when unknown or no agent)."""
        if agent_id is None:
            return None
        key = (tenant_id, agent_id)
        now = time.monotonic()
        hit = self._configs.get(key)
        # Agent configs change rarely: a short in-process cache saves a query per request.
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        config = await self.agents.get(tenant_id, agent_id)
        if len(self._configs) > 10_000:
            self._configs.clear()
        self._configs[key] = (now, config)
        return config

    def known_config(
        self, tenant_id: str, agent_id: str | None
    ) -> tuple[AgentConfig | None, float]:
        """The config read last, however old, and its age in seconds (None when unknown or no
        agent). Raises ``LookupError`` when it was never read."""
        if agent_id is None:
            return None, 0.0
        hit = self._configs.get((tenant_id, agent_id))
        if hit is None:
            raise LookupError(f"agent {agent_id!r} of tenant {tenant_id!r} was never read")
        return hit[1], time.monotonic() - hit[0]

    def named(self, name: Provider | None) -> LongTermProvider:
        """The provider called ``name`` (built-in when None); raises ``ProviderUnavailable``
        for an external provider this deployment has no URL for."""
        if name in (None, "MYSQL"):
            return self.builtin
        external = self._external.get(str(name))
        if external is not None:
            return external
        setting = _SETTING.get(str(name))
        if setting is None:
            raise ProviderUnavailable(f"unknown long-term provider {name}")
        raise ProviderUnavailable(f"{name} is not configured ({setting})")

    async def for_agent(self, tenant_id: str, agent_id: str | None) -> LongTermProvider:
        """Built-in when the provider is unset, the agent unknown or its config unreadable."""
        try:
            config = await self.config(tenant_id, agent_id)
        except Exception as exc:
            log.warning("agent config unreadable (%r); using the built-in store", exc)
            config = None
        return self.named(config.long_memory_provider if config else None)

    async def tenant_agents(self, tenant_id: str) -> list[tuple[str, Provider | None]]:
        """(agent id, configured provider) of every configured agent of the tenant."""
        return await self.agents.providers_of(tenant_id)

    async def tenant_agent_ids(self, tenant_id: str) -> list[str]:
        """Ids of every configured agent of the tenant (MemOS cannot list a user's cubes)."""
        return [agent for agent, _ in await self.tenant_agents(tenant_id)]


def provider_name(config: AgentConfig | None) -> Provider:
    return (config.long_memory_provider if config else None) or "MYSQL"
