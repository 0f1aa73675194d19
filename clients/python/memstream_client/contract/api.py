"""The query API's request and response bodies (docs/api.md): what the API validates
and answers, what the load path takes and returns, and what the client sends and reads.

Each model builds its validator and serializer on first use (``defer_build``): building all
of them was most of what importing the client cost, and a caller uses a few. A server builds
them all at once with :func:`memstream_client.contract.build_models`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

# Neither starting nor ending with white space: the database pads with spaces when it compares,
# so "u1 " would be "u1" there (the event schemas say the same).
Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^\S([\s\S]*\S)?$")]
Text = Annotated[str, StringConstraints(max_length=32768)]
ProviderName = Literal["MEMOS", "MEM0", "MYSQL"]
MemoryType = Literal["text_mem", "pref_mem", "skill_mem", "tool_mem"]
MEMORY_TYPES: tuple[MemoryType, ...] = ("text_mem", "pref_mem", "skill_mem", "tool_mem")
# What an agent without a configuration row (or a request without an agent) gets.
DEFAULT_CONTEXT_ROUNDS = 10


class Shape(BaseModel):
    """A body the API takes or answers; built on first use."""

    model_config = ConfigDict(defer_build=True)


class RequestBody(Shape):
    """A request body: unknown fields are an error, strings are kept exactly as sent."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ContextRequest(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "tenant_id": "acme",
                    "user_id": "u1",
                    "agent_id": "travel",
                    "conversation_id": "c1",
                    "query": "Where should I eat tonight?",
                    "context_rounds": 5,
                }
            ]
        }
    )

    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    conversation_id: Id
    query: Text = ""
    # 0 is no history: the summary alone, if there is one.
    context_rounds: int | None = Field(default=None, ge=0, le=500)
    filter_sensitive: bool = True
    # The conversation's turns and summary only when every stored message of it is this
    # user's, else none: what a model may name (the MCP tools) reaches no other user's chat.
    own_conversation: bool = False


class ContextMessage(Shape):
    role: str
    content: str
    tokens: int
    summary: bool = False


class ContextItem(Shape):
    id: str
    cube_id: str
    memory_type: str
    content: str
    score: float


class LongTerm(Shape):
    provider: ProviderName | None
    user_profile: str = ""
    agent_memory: str = ""
    items: list[ContextItem] = []


class TokenCounts(Shape):
    messages: int
    user_profile: int
    agent_memory: int


class ContextResponse(Shape):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "conversation_id": "c1",
                    "messages": [
                        {
                            "role": "system",
                            "content": "The user is planning a week in Lisbon in May.",
                            "tokens": 12,
                            "summary": True,
                        },
                        {"role": "user", "content": "Book the hotel by the river.", "tokens": 8},
                        {"role": "assistant", "content": "Done: 3 nights.", "tokens": 6},
                    ],
                    "long_term": {
                        "provider": "MYSQL",
                        "user_profile": "[2026-03-01] The user is vegetarian.",
                        "agent_memory": "",
                        "items": [
                            {
                                "id": "0b6c4b0e8f0c4c1c9d0f1d5b6f2a7e11",
                                "cube_id": "user_profile",
                                "memory_type": "pref_mem",
                                "content": "The user is vegetarian.",
                                "score": 0.82,
                            }
                        ],
                    },
                    "tokens": {"messages": 26, "user_profile": 12, "agent_memory": 0},
                    "degraded": [],
                }
            ]
        }
    )

    conversation_id: str
    messages: list[ContextMessage]
    long_term: LongTerm
    tokens: TokenCounts
    degraded: list[str]


class StoredMessageOut(Shape):
    event_id: str
    role: str
    message_type: str
    content: str
    token_count: int
    created_at: datetime


class MessagesResponse(Shape):
    conversation_id: str
    messages: list[StoredMessageOut]


class MemoryOut(ContextItem):
    source_event_ids: list[str]
    created_at: datetime
    origin: str = Field(
        default="memory",
        description="`memory`, or `history` for the passage of a stored chat turn that a "
        "search answered with where memories could not (the id is `turn:<event_id>`).",
    )


class MemoriesResponse(Shape):
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
    at: datetime | None = Field(
        default=None,
        description="When the question is asked (RFC 3339; default now): its relative dates "
        '("two weeks ago", "yesterday") count from it.',
    )


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


class DeletedResponse(Shape):
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


class ErrorDetail(Shape):
    code: str
    message: str


class ErrorResponse(Shape):
    """Every error answer: a machine ``code`` and a readable ``message``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"error": {"code": "forbidden", "message": "this key may not access that tenant"}}
            ]
        }
    )

    error: ErrorDetail


# Items under a key of the caller's choosing (a LangGraph store's): ``/v1/items``.
NamespacePart = Annotated[str, StringConstraints(min_length=1, max_length=256)]
ItemKey = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class ItemPutRequest(RequestBody):
    """Store ``value`` under ``namespace`` and ``key`` of a user: its text is a memory of the
    agent's provider, and a new value supersedes the memory the key held."""

    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    cube_id: Annotated[str, StringConstraints(min_length=1, max_length=140)] = "user_profile"
    namespace: list[NamespacePart] = Field(default_factory=list, max_length=16)
    key: ItemKey
    value: dict[str, object]
    memory_type: MemoryType = "text_mem"
    importance: int = Field(default=5, ge=1, le=10)


class ItemSearchRequest(RequestBody):
    """Items under ``namespace_prefix`` by relevance to ``query`` (newest first without one);
    at the root (an empty prefix) the memories learned without a key too."""

    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    namespace_prefix: list[NamespacePart] = Field(default_factory=list, max_length=16)
    query: Annotated[str, StringConstraints(max_length=32768)] | None = None
    filter: dict[str, object] | None = None
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=1000)


class ItemOut(Shape):
    namespace: list[str]
    key: str
    value: dict[str, object]
    memory_id: str
    cube_id: str
    created_at: datetime
    updated_at: datetime
    score: float | None = None


class ItemsResponse(Shape):
    items: list[ItemOut]


class UserNamespace(Shape):
    user_id: str
    namespace: list[str]


class NamespacesResponse(Shape):
    namespaces: list[UserNamespace]
