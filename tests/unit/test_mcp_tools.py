"""The MCP tools' schemas and argument checks, the scope ``/mcp`` reads from a request, and
``memstream-mcp``'s options, with the SDK's own client in process. The API behind the tools is
an address nothing listens on: a call whose arguments pass gets as far as the API client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent

from memstream.api.mcp import scope_of
from memstream_client import ApiError, AsyncClient, ServiceUnavailable
from memstream_client.mcp import command
from memstream_client.mcp.scope import Memory, Scope
from memstream_client.mcp.tools import memory_server, refusal

NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing answers, the connection is refused
IDENTITY = {"tenant_id", "user_id", "agent_id", "cube_id"}


def client(scope: Scope) -> Client:
    @asynccontextmanager
    async def connect(_: Context) -> AsyncIterator[Memory]:
        async with AsyncClient(NOWHERE, retries=0, timeout=2) as api:
            yield Memory(api, scope)

    return Client(memory_server(connect))


def text(result: CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


async def test_each_tool_has_a_description_and_a_schema_without_whose_memory() -> None:
    async with client(Scope("acme", "u1", "travel")) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
    assert list(tools) == [
        "get_context",
        "search_memory",
        "add_memory",
        "list_memories",
        "delete_memory",
    ]
    required = {name: set(tool.input_schema.get("required", [])) for name, tool in tools.items()}
    assert required == {
        "get_context": set(),
        "search_memory": {"query"},
        "add_memory": {"content"},
        "list_memories": set(),
        "delete_memory": {"memory_id"},
    }
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        properties: dict[str, Any] = tool.input_schema.get("properties", {})
        assert not IDENTITY & set(properties), "the connection, not the model, says whose memory"
        assert all(p.get("description") for p in properties.values()), tool.name
        assert tool.output_schema is not None
    assert tools["add_memory"].input_schema["properties"]["memory_type"]["enum"] == [
        "text_mem",
        "pref_mem",
        "skill_mem",
        "tool_mem",
    ]
    assert tools["search_memory"].annotations and tools["search_memory"].annotations.read_only_hint
    assert tools["delete_memory"].annotations
    assert tools["delete_memory"].annotations.destructive_hint


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("search_memory", {}, "query"),
        ("search_memory", {"query": ""}, "query"),
        ("search_memory", {"query": "tea", "top_k": 0}, "top_k"),
        ("search_memory", {"query": "tea", "top_k": 101}, "top_k"),
        ("add_memory", {"content": "   "}, "content"),
        ("add_memory", {"content": "x" * 2001}, "content"),
        ("add_memory", {"content": "Likes tea.", "memory_type": "fact"}, "memory_type"),
        ("add_memory", {"content": "Likes tea.", "about": "world"}, "about"),
        ("add_memory", {"content": "Likes tea.", "importance": 11}, "importance"),
        ("get_context", {"conversation_id": ""}, "conversation_id"),
        ("get_context", {"query": "x" * 32769}, "query"),
        ("delete_memory", {}, "memory_id"),
        ("delete_memory", {"memory_id": "m" * 65}, "memory_id"),
    ],
)
async def test_invalid_arguments_are_a_tool_error_naming_the_field(
    tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with client(Scope("acme", "u1", "travel")) as mcp:
        result = await mcp.call_tool(tool, arguments)
    assert result.is_error
    assert "validation error" in text(result) and field in text(result)
    assert "not reachable" not in text(result), "refused before any call to the API"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_context", {}),
        ("search_memory", {"query": "tea", "top_k": 100}),
        ("add_memory", {"content": "Likes tea.", "about": "agent", "importance": 10}),
        ("list_memories", {}),
        ("delete_memory", {"memory_id": "m1"}),
    ],
)
async def test_valid_arguments_reach_the_api(tool: str, arguments: dict[str, Any]) -> None:
    async with client(Scope("acme", "u1", "travel")) as mcp:
        result = await mcp.call_tool(tool, arguments)
    assert result.is_error and "memstream is not reachable" in text(result)


async def test_a_memory_about_the_agent_needs_an_agent() -> None:
    async with client(Scope("acme", "u1")) as mcp:
        result = await mcp.call_tool("add_memory", {"content": "Likes tea.", "about": "agent"})
    assert result.is_error and "this connection has no agent" in text(result)


def test_an_api_error_becomes_a_tool_error_with_the_api_message() -> None:
    refused = refusal(ApiError(403, "forbidden", "this API key may not access that tenant"))
    assert str(refused) == (
        "memstream refused the call (403 forbidden): this API key may not access that tenant"
    )
    assert "not reachable" in str(refusal(ServiceUnavailable("POST /v1/context: no answer")))


KEYS = {"key-a": "acme", "key-b": "beta"}


def test_over_http_the_key_fixes_the_tenant_and_the_headers_the_rest() -> None:
    headers = {"authorization": "Bearer key-a", "x-memstream-user-id": "u1"}
    assert scope_of(headers, KEYS) == Scope("acme", "u1", None)
    named = {**headers, "x-memstream-tenant-id": "beta", "x-memstream-agent-id": "travel"}
    # Named, the tenant is the one /v1 then checks the key against (403 for key-a).
    assert scope_of(named, KEYS) == Scope("beta", "u1", "travel")
    assert scope_of({"x-memstream-tenant-id": "t", "x-memstream-user-id": "u"}, {}) == Scope(
        "t", "u"
    )


@pytest.mark.parametrize(
    ("headers", "keys", "status", "says"),
    [
        ({"authorization": "Bearer key-a"}, KEYS, 400, "x-memstream-user-id"),
        ({"x-memstream-user-id": "u1"}, {}, 400, "x-memstream-tenant-id"),
        ({"x-memstream-user-id": "u1"}, KEYS, 401, "Bearer"),
        ({"x-memstream-user-id": " ", "x-memstream-tenant-id": "t"}, {}, 400, "1 to 128"),
        ({"x-memstream-user-id": "u" * 129, "x-memstream-tenant-id": "t"}, {}, 400, "1 to 128"),
        ({"x-memstream-user-id": "u", "x-memstream-tenant-id": ""}, {}, 400, "1 to 128"),
    ],
)
def test_a_request_without_a_scope_is_refused(
    headers: dict[str, str], keys: dict[str, str], status: int, says: str
) -> None:
    with pytest.raises(ApiError) as refused:
        scope_of(headers, keys)
    assert refused.value.status == status and says in refused.value.message


def test_the_command_takes_the_scope_and_refuses_blank_ids() -> None:
    args = command.parser().parse_args(["--tenant-id", "acme", "--user-id", "u1"])
    assert (args.api_url, args.tenant_id, args.user_id, args.agent_id) == (
        "http://127.0.0.1:8080",
        "acme",
        "u1",
        None,
    )
    for argv in (["--tenant-id", "acme"], ["--tenant-id", " ", "--user-id", "u1"]):
        with pytest.raises(SystemExit) as refused:
            command.parser().parse_args(argv)
        assert refused.value.code == 2
