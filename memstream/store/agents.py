"""Agent configuration rows (``agent_config``): which long-term provider an agent uses.

Defaults, the same for the load path and the long-term chain: an agent without a row (or a
request without an agent) has long-term memory on, in the built-in store, with
``DEFAULT_CONTEXT_ROUNDS``; an agent whose row turns ``open_long_memory`` off or binds no
model (``model_target_id``) has none, neither read nor written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Executable, bindparam, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.schema import agent_config
from memstream_client.contract.api import DEFAULT_CONTEXT_ROUNDS, ProviderName

# The providers the API's bodies name; one list for the wire and the record.
Provider = ProviderName


@dataclass(frozen=True, slots=True)
class AgentConfig:
    tenant_id: str
    agent_id: str
    long_memory_provider: Provider | None = None
    open_long_memory: bool = True
    context_rounds: int = DEFAULT_CONTEXT_ROUNDS
    model_target_id: str | None = None


def long_term_enabled(config: AgentConfig | None) -> bool:
    """Whether an agent's sessions build long-term memory and its requests read it."""
    return config is None or (config.open_long_memory and bool(config.model_target_id))


def bound_model(config: AgentConfig | None, models: Mapping[str, str]) -> str | None:
    """The LLM model that serves the agent's ``model_target_id`` (``models`` maps targets to
    the endpoint's models); None for the one global model."""
    target = config.model_target_id if config else None
    return models.get(target) if target else None


# Built once: a config read on the load path costs no statement construction.
_GET = select(
    agent_config.c.tenant_id,
    agent_config.c.agent_id,
    agent_config.c.long_memory_provider,
    agent_config.c.open_long_memory,
    agent_config.c.context_rounds,
    agent_config.c.model_target_id,
).where(
    agent_config.c.tenant_id == bindparam("tenant_id"),
    agent_config.c.agent_id == bindparam("agent_id"),
)


class AgentConfigStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get(self, tenant_id: str, agent_id: str) -> AgentConfig | None:
        params = {"tenant_id": tenant_id, "agent_id": agent_id}
        async with self._engine.connect() as conn:
            row = (await conn.execute(_GET, params)).first()
        if row is None:
            return None
        values = dict(row._mapping)
        values["open_long_memory"] = bool(values["open_long_memory"])
        return AgentConfig(**values)

    async def providers_of(self, tenant_id: str) -> list[tuple[str, Provider | None]]:
        """(agent id, configured provider) of every configured agent of the tenant."""
        query = (
            select(agent_config.c.agent_id, agent_config.c.long_memory_provider)
            .where(agent_config.c.tenant_id == tenant_id)
            .order_by(agent_config.c.agent_id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(row.agent_id, row.long_memory_provider) for row in rows]

    async def put(self, config: AgentConfig) -> AgentConfig:
        """Create or replace an agent's configuration."""
        row = {
            "tenant_id": config.tenant_id,
            "agent_id": config.agent_id,
            "long_memory_provider": config.long_memory_provider,
            "open_long_memory": config.open_long_memory,
            "context_rounds": config.context_rounds,
            "model_target_id": config.model_target_id,
            "updated_at": datetime.now(UTC).replace(tzinfo=None),
        }
        changes = {k: v for k, v in row.items() if k not in ("tenant_id", "agent_id")}
        stmt: Executable
        if self._engine.dialect.name == "sqlite":
            stmt = (
                sqlite.insert(agent_config)
                .values(row)
                .on_conflict_do_update(index_elements=["tenant_id", "agent_id"], set_=changes)
            )
        else:
            stmt = mysql.insert(agent_config).values(row).on_duplicate_key_update(**changes)
        async with self._engine.begin() as conn:
            await conn.execute(stmt)
        return config
