"""``/v1/agents/{agent_id}/config``: read and write an agent's ``agent_config`` row."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from memstream.api.auth import check_tenant
from memstream.api.errors import NOT_FOUND
from memstream.api.services import ServicesDep
from memstream.errors import ApiError
from memstream.store.agents import AgentConfig
from memstream_client.contract.api import AgentConfigBody, AgentConfigOut, Id

router = APIRouter()


@router.get("/v1/agents/{agent_id}/config", response_model=AgentConfigOut, responses=NOT_FOUND)
async def get_config(
    agent_id: Id, tenant_id: Annotated[Id, Query()], request: Request, services: ServicesDep
) -> AgentConfigOut:
    check_tenant(request, tenant_id)
    config = await services.agents.get(tenant_id, agent_id)
    if config is None:
        raise ApiError(404, "not_found", f"agent {agent_id!r} has no configuration")
    return AgentConfigOut.model_validate(config, from_attributes=True)


@router.put("/v1/agents/{agent_id}/config", response_model=AgentConfigOut)
async def put_config(
    agent_id: Id,
    body: AgentConfigBody,
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
) -> AgentConfigOut:
    check_tenant(request, tenant_id)
    config = AgentConfig(tenant_id=tenant_id, agent_id=agent_id, **body.model_dump())
    await services.agents.put(config)
    return AgentConfigOut.model_validate(config, from_attributes=True)
