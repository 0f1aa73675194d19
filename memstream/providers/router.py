"""Which long-term provider serves an agent (DESIGN "Long-term memory", routing)."""

from __future__ import annotations

import logging
import time

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.errors import ProviderUnavailable
from memstream.providers.base import LongTermProvider
from memstream.providers.mysql import MySQLProvider
from memstream.store.agents import AgentConfig, AgentConfigStore, Provider

log = logging.getLogger(__name__)


class ProviderRouter:
    """Agent configs (cached briefly) and the provider each one names."""

    def __init__(self, engine: AsyncEngine, *, config_cache_seconds: float = 5.0) -> None:
        self.agents = AgentConfigStore(engine)
        self.builtin = MySQLProvider(engine)
        self._ttl = config_cache_seconds
        self._configs: dict[tuple[str, str], tuple[float, AgentConfig | None]] = {}

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

    def named(self, name: Provider | None) -> LongTermProvider:
        if name in (None, "MYSQL"):
            return self.builtin
        raise ProviderUnavailable(f"long-term provider {name} is not available in this deployment")

    async def for_agent(self, tenant_id: str, agent_id: str | None) -> LongTermProvider:
        """Built-in when the provider is unset, the agent unknown or its config unreadable."""
        try:
            config = await self.config(tenant_id, agent_id)
        except Exception as exc:
            log.warning("agent config unreadable (%r); using the built-in store", exc)
            config = None
        return self.named(config.long_memory_provider if config else None)

    async def for_tenant(self, tenant_id: str) -> list[LongTermProvider]:
        """Every provider the tenant's agents use (the built-in store always)."""
        return [self.builtin]


def provider_name(config: AgentConfig | None) -> Provider:
    return (config.long_memory_provider if config else None) or "MYSQL"
