"""The ``search_memory`` and ``add_memory`` tools of ``agent_control`` and ``both``: the API's
``POST /v1/memories/search`` and ``POST /v1/memories``, with the input shapes of AgentScope's
own ``Mem0Middleware`` tools, so that prompts written for one serve the other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from memstream_client.contract.errors import ApiError, ServiceUnavailable

if TYPE_CHECKING:
    from memstream_client.agentscope.middleware import MemstreamMiddleware

# What a tool call can fail with and the model can act on: the API's answer, or no answer, or
# an argument the request models refuse (pydantic's ValidationError is a ValueError).
FAILURES = (ApiError, ServiceUnavailable, ValueError)


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema: an object of ``properties``; all but ``limit`` are required."""
    required = [name for name in properties if name != "limit"]
    return {"type": "object", "properties": properties, "required": required}


class _MemoryTool(ToolBase):
    """A memory tool of one middleware, allowed without asking: recalling and noting facts is
    what the agent was given memory for."""

    is_external_tool = False
    is_state_injected = False
    is_mcp = False
    mcp_name = None

    def __init__(self, memory: MemstreamMiddleware) -> None:
        super().__init__()
        self.memory = memory

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="memstream memory tools are always allowed"
        )


class SearchMemoryTool(_MemoryTool):
    name = "search_memory"
    description = (
        "Search long-term memory about the user (and this agent's own memory) with short, "
        "targeted keywords. Each keyword is one search; the results are merged, best first."
    )
    input_schema = _object(
        keywords=_strings(
            "Short search phrases: a name, a place, a date, or a few words on what to recall "
            "(e.g. 'food allergies')."
        ),
        limit={"type": "integer", "description": "At most this many memories per keyword."},
    )
    is_concurrency_safe = True
    is_read_only = True

    async def call(self, keywords: list[str], limit: int | None = None) -> ToolChunk:
        wanted = [k for k in keywords if k.strip()]
        if not wanted:
            return _text("(no keywords given: nothing searched)")
        try:
            found = await self.memory.search(wanted, limit or self.memory.top_k)
        except FAILURES as exc:
            return _error(f"Error searching memory: {exc}")
        if not found:
            return _text("(no relevant memories found)")
        return _text("\n".join(f"- {line}" for line in found))


class AddMemoryTool(_MemoryTool):
    name = "add_memory"
    description = (
        "Record durable facts worth remembering in later conversations (who, what, where, "
        "preferences, decisions). Only `content` is stored; `thinking` stays in this result."
    )
    input_schema = _object(
        thinking={"type": "string", "description": "Why this is worth remembering; not stored."},
        content=_strings(
            "The facts to remember, each one complete, standalone sentence (at most 2,000 "
            "characters)."
        ),
    )
    is_concurrency_safe = False
    is_read_only = False

    async def call(self, thinking: str, content: list[str]) -> ToolChunk:
        facts = [c for c in content if c.strip()]
        if not facts:
            return _error("`content` is empty: nothing recorded.")
        try:
            stored = await self.memory.add(facts)
        except FAILURES as exc:
            return _error(f"Error recording memory: {exc}")
        rationale = f" (rationale: {thinking})" if thinking else ""
        ids = ", ".join(item.id for item in stored)
        return _text(f"Recorded {len(stored)} memories{rationale}: {ids}")


def memory_tools(memory: MemstreamMiddleware) -> list[ToolBase]:
    return [SearchMemoryTool(memory), AddMemoryTool(memory)]


def _text(message: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(type="text", text=message)])


def _error(message: str) -> ToolChunk:
    """A failed call the model sees and may retry or move on from."""
    return ToolChunk(content=[TextBlock(type="text", text=message)], state=ToolResultState.ERROR)
