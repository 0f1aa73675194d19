"""Request and response bodies of the query API (CONTRACT section 4) beyond the load path's
(``memstream.loadpath.models``), whose types they build on."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from memstream.loadpath.models import ContextItem, Id, ProviderName, RequestBody
from memstream.memory import MemoryType
from memstream.store.agents import DEFAULT_CONTEXT_ROUNDS


class StoredMessageOut(BaseModel):
    event_id: str
    role: str
    message_type: str
    content: str
    token_count: int
    created_at: datetime


class MessagesResponse(BaseModel):
    conversation_id: str
    messages: list[StoredMessageOut]


class MemoryOut(ContextItem):
    source_event_ids: list[str]
    created_at: datetime


class MemoriesResponse(BaseModel):
    items: list[MemoryOut]
    degraded: list[str] = Field(
        default_factory=list,
        description="What fell back but still answered: `embeddings` when a search was "
        "answered lexically because the embeddings endpoint failed.",
    )


class SearchRequest(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "tenant_id": "acme",
                    "user_id": "u1",
                    "agent_id": "travel",
                    "query": "what does the user eat",
                    "top_k": 5,
                }
            ]
        }
    )

    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    query: Annotated[str, StringConstraints(min_length=1, max_length=32768)]
    top_k: int = Field(default=10, ge=1, le=100)


class AddMemoryRequest(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "tenant_id": "acme",
                    "user_id": "u1",
                    "agent_id": "travel",
                    "cube_id": "user_profile",
                    "memory_type": "pref_mem",
                    "content": "The user is vegetarian.",
                    "importance": 7,
                }
            ]
        }
    )

    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    cube_id: Annotated[str, StringConstraints(min_length=1, max_length=140)]
    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
    importance: int = Field(default=5, ge=1, le=10)


class DeletedResponse(BaseModel):
    deleted: list[str]


class AgentConfigBody(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "long_memory_provider": "MYSQL",
                    "open_long_memory": True,
                    "context_rounds": 10,
                    "model_target_id": "gpt-4o-mini",
                }
            ]
        }
    )

    long_memory_provider: ProviderName | None = None
    open_long_memory: bool = True
    context_rounds: int = Field(default=DEFAULT_CONTEXT_ROUNDS, ge=0, le=500)
    model_target_id: Id | None = None


class AgentConfigOut(AgentConfigBody):
    tenant_id: str
    agent_id: str
