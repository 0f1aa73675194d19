"""Request and response bodies of the query API (CONTRACT section 4)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from memstream.memory import MemoryType

Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"\S")]
Text = Annotated[str, StringConstraints(max_length=32768)]
ProviderName = Literal["MEMOS", "MEM0", "MYSQL"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ContextRequest(_Body):
    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    conversation_id: Id
    query: Text = ""
    context_rounds: int | None = Field(default=None, ge=1, le=500)
    filter_sensitive: bool = True


class ContextMessage(BaseModel):
    role: str
    content: str
    tokens: int
    summary: bool = False


class ContextItem(BaseModel):
    id: str
    cube_id: str
    memory_type: str
    content: str
    score: float


class LongTerm(BaseModel):
    provider: ProviderName | None
    user_profile: str = ""
    agent_memory: str = ""
    items: list[ContextItem] = []


class TokenCounts(BaseModel):
    messages: int
    user_profile: int
    agent_memory: int


class ContextResponse(BaseModel):
    conversation_id: str
    messages: list[ContextMessage]
    long_term: LongTerm
    tokens: TokenCounts
    degraded: list[str]


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


class MemoryOut(BaseModel):
    id: str
    cube_id: str
    memory_type: str
    content: str
    score: float
    source_event_ids: list[str]
    created_at: datetime


class MemoriesResponse(BaseModel):
    items: list[MemoryOut]


class SearchRequest(_Body):
    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    query: Annotated[str, StringConstraints(min_length=1, max_length=32768)]
    top_k: int = Field(default=10, ge=1, le=100)


class AddMemoryRequest(_Body):
    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    cube_id: Annotated[str, StringConstraints(min_length=1, max_length=140)]
    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
    importance: int = Field(default=5, ge=1, le=10)


class DeletedResponse(BaseModel):
    deleted: list[str]


class AgentConfigBody(_Body):
    long_memory_provider: ProviderName | None = None
    open_long_memory: bool = True
    context_rounds: int = Field(default=10, ge=1, le=500)
    model_target_id: Id | None = None


class AgentConfigOut(AgentConfigBody):
    tenant_id: str
    agent_id: str
