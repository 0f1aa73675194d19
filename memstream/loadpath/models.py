"""The load path's request and answer (``POST /v1/context``, CONTRACT section 4).

They are the API's bodies too, defined here so the load path owns its own vocabulary and the
API builds on it; the field constraints are what the API validates.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"\S")]
Text = Annotated[str, StringConstraints(max_length=32768)]
ProviderName = Literal["MEMOS", "MEM0", "MYSQL"]


class RequestBody(BaseModel):
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
