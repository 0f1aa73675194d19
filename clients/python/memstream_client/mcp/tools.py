"""The five memory tools, one implementation for every transport.

A tool never names whose memory it touches: the tenant, user and agent are the connection's
(:class:`Scope`), fixed by the command line over stdio and by the request's headers and key at
the API's ``/mcp``, so a model can only reach the memory its host was configured for. Each call
goes through the API client to the ``/v1`` routes, so every check of the API applies to it; an
error answer becomes a tool error carrying the API's message, for the model to read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from memstream_client import ApiError, AsyncClient, ServiceUnavailable
from memstream_client.contract.api import (
    ContextResponse,
    DeletedResponse,
    MemoriesResponse,
    MemoryOut,
    MemoryType,
)
from memstream_client.mcp.scope import Memory, Scope

M = TypeVar("M", bound=BaseModel)
LEVELS: tuple[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], ...] = (
    "DEBUG",
    "INFO",
    "WARNING",
    "ERROR",
    "CRITICAL",
)

# The conversation ``get_context`` reads when the model names none: a host whose chat is not
# recorded in memstream gets long-term memory alone (an empty short-term window).
NO_CONVERSATION = "mcp"
USER_PROFILE = "user_profile"

INSTRUCTIONS = (
    "memstream is this user's long-term memory. Call get_context with the user's request"
    " before answering anything that may depend on what you know about them; call"
    " add_memory when they tell you a lasting fact, preference or instruction; call"
    " search_memory to look something up, list_memories to see everything, delete_memory"
    " when they ask you to forget one memory."
)


# How a tool call gets its ``Memory``: from the process (stdio) or from the request (HTTP).
Connect = Callable[[Context], AbstractAsyncContextManager[Memory]]

# What the model reads about each argument (the limits are the API's own).
_ABOUT = {
    "query": "What to look for, in the user's words, e.g. 'what does the user eat'",
    "context_query": "The user's current request; memories relevant to it come first",
    "conversation_id": "The conversation whose recent turns to include, when memstream records"
    " it; leave it out otherwise",
    "top_k": "How many memories at most, best first",
    "content": "One self-contained fact in the third person, e.g. 'The user is vegetarian.'",
    "memory_type": "text_mem: a fact; pref_mem: a preference; skill_mem: how to do something;"
    " tool_mem: how to use a tool",
    "about": "user: about the user, shared by every agent; agent: this agent's own notes about"
    " the user",
    "importance": "1 (trivia) to 10 (never forget)",
    "memory_id": "The id of a memory, as get_context, search_memory or list_memories gave it",
}
Query = Annotated[str, Field(min_length=1, max_length=32768, description=_ABOUT["query"])]
ContextQuery = Annotated[str, Field(max_length=32768, description=_ABOUT["context_query"])]
ConversationId = Annotated[
    str, Field(min_length=1, max_length=128, pattern=r"\S", description=_ABOUT["conversation_id"])
]
TopK = Annotated[int, Field(ge=1, le=100, description=_ABOUT["top_k"])]
Content = Annotated[
    str, Field(min_length=1, max_length=2000, pattern=r"\S", description=_ABOUT["content"])
]
Kind = Annotated[MemoryType, Field(description=_ABOUT["memory_type"])]
About = Annotated[Literal["user", "agent"], Field(description=_ABOUT["about"])]
Importance = Annotated[int, Field(ge=1, le=10, description=_ABOUT["importance"])]
MemoryId = Annotated[str, Field(min_length=1, max_length=64, description=_ABOUT["memory_id"])]


def refusal(failure: ApiError | ServiceUnavailable) -> ToolError:
    """The tool error a failed API call becomes: the API's own message, for the model."""
    if isinstance(failure, ApiError):
        return ToolError(
            f"memstream refused the call ({failure.status} {failure.code}): {failure.message}"
        )
    return ToolError(f"memstream is not reachable; try again shortly ({failure})")


def cube_of(scope: Scope, about: str) -> str:
    """The cube a memory ``about`` the user or the agent goes to."""
    if about == "user":
        return USER_PROFILE
    if scope.agent_id is None:
        raise ToolError("this connection has no agent: add the memory about the user instead")
    return f"agent_{scope.agent_id}"


def memory_server(connect: Connect, *, log_level: str = "WARNING") -> MCPServer:
    """An MCP server with the memory tools, each call reaching memstream through ``connect``."""
    server: MCPServer = MCPServer(
        "memstream",
        instructions=INSTRUCTIONS,
        log_level=next((level for level in LEVELS if level == log_level.upper()), "WARNING"),
    )
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    async def answer(ctx: Context, call: Callable[[AsyncClient, Scope], Awaitable[M]]) -> M:
        async with connect(ctx) as memory:
            try:
                return await call(memory.api, memory.scope)
            except (ApiError, ServiceUnavailable) as exc:
                raise refusal(exc) from exc

    @server.tool(annotations=reads)
    async def get_context(
        ctx: Context,
        query: ContextQuery = "",
        conversation_id: ConversationId = NO_CONVERSATION,
    ) -> ContextResponse:
        """What memstream knows that bears on the user's request: their profile, this agent's
        memories of them ranked by relevance to the query, and the recent turns of the
        conversation when memstream records it. Call it before answering."""
        return await answer(
            ctx,
            lambda api, s: api.context(
                tenant_id=s.tenant_id,
                user_id=s.user_id,
                agent_id=s.agent_id,
                conversation_id=conversation_id,
                query=query,
                # The model names the conversation: only one of this user's is read.
                own_conversation=True,
            ),
        )

    @server.tool(annotations=reads)
    async def search_memory(ctx: Context, query: Query, top_k: TopK = 10) -> MemoriesResponse:
        """The user's memories most relevant to a query, best first, each with its id and a
        score."""
        return await answer(
            ctx,
            lambda api, s: api.search_memories(
                tenant_id=s.tenant_id,
                user_id=s.user_id,
                agent_id=s.agent_id,
                query=query,
                top_k=top_k,
            ),
        )

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    async def add_memory(
        ctx: Context,
        content: Content,
        memory_type: Kind = "text_mem",
        about: About = "user",
        importance: Importance = 5,
    ) -> MemoryOut:
        """Remember one lasting fact, preference or instruction the user gave. Adding the same
        text twice keeps one memory. Answers the stored memory with its id."""
        return await answer(
            ctx,
            lambda api, s: api.add_memory(
                tenant_id=s.tenant_id,
                user_id=s.user_id,
                agent_id=s.agent_id,
                cube_id=cube_of(s, about),
                memory_type=memory_type,
                content=content,
                importance=importance,
            ),
        )

    @server.tool(annotations=reads)
    async def list_memories(ctx: Context) -> MemoriesResponse:
        """Every live memory of the user for this agent; prefer search_memory when looking for
        something."""
        return await answer(
            ctx,
            lambda api, s: api.memories(
                tenant_id=s.tenant_id, user_id=s.user_id, agent_id=s.agent_id
            ),
        )

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def delete_memory(ctx: Context, memory_id: MemoryId) -> DeletedResponse:
        """Forget one memory by its id, when the user asks to or it is wrong. Answers the ids
        deleted."""
        return await answer(
            ctx,
            lambda api, s: api.delete_memory(
                tenant_id=s.tenant_id, memory_id=memory_id, user_id=s.user_id
            ),
        )

    return server
