"""The MCP server with the SDK's own client, over stdio (``memstream-mcp``, ``memstream mcp``)
and over streamable HTTP (the API's ``/mcp``), against a real API process and worker: a memory
added through a tool is found by ``search_memory`` and by ``/v1/context``, a key of another
tenant is refused, and an API error becomes a tool error carrying the API's message."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import ensure_topics
from memstream.settings import Settings
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.summaries import Summary, SummaryStore
from memstream.text.tokens import count_tokens
from memstream_client import Publisher
from tests.support import REPO
from tests.support.processes import api_process
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOOLS = ["get_context", "search_memory", "add_memory", "list_memories", "delete_memory"]


@dataclass(frozen=True)
class Served:
    settings: Settings
    url: str
    tenant: str
    key: str
    other_key: str


@pytest.fixture(scope="module")
def served(services: Settings) -> Iterator[Served]:
    """``memstream api`` in its own process with a key for a fresh tenant and one for another."""
    tenant = unique("mcp")
    # The load path's time limits are for production latency: on a loaded test machine a
    # cold first search can take longer, and what these tests compare is the memory.
    settings = isolated_settings(
        api_port=free_port(),
        log_level="WARNING",
        short_term_timeout_seconds=10,
        long_term_timeout_seconds=10,
        api_keys=f"key-{tenant}:{tenant},key-other-{tenant}:{unique('other')}",
    )
    with api_process(settings) as url:
        yield Served(settings, url, tenant, f"key-{tenant}", f"key-other-{tenant}")


def over_http(served: Served, key: str, **headers: str) -> Client:
    """The SDK's client on the API's ``/mcp`` with a bearer key and the scope's headers."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}", **headers}, timeout=30)
    return Client(streamable_http_client(f"{served.url}/mcp", http_client=http))


def over_stdio(served: Served, key: str, user: str, *command: str, agent: str = "travel") -> Client:
    """The SDK's client on a stdio server it starts: ``command`` with the scope's options."""
    paths = [str(REPO), str(REPO / "clients" / "python"), os.environ.get("PYTHONPATH", "")]
    scope = {"--tenant-id": served.tenant, "--user-id": user, "--agent-id": agent}
    options = [part for option in scope.items() for part in option]
    parameters = StdioServerParameters(
        command=sys.executable,
        args=[*command, "--api-url", served.url, *options],
        env={"MEMSTREAM_API_KEY": key, "PYTHONPATH": os.pathsep.join(filter(None, paths))},
        cwd=REPO,
    )
    return Client(parameters)


def text(result: CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


async def structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


async def v1_context(served: Served, user: str, query: str) -> dict[str, Any]:
    body = {"tenant_id": served.tenant, "user_id": user, "agent_id": "travel",
            "conversation_id": "c-none", "query": query}  # fmt: skip
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        answer = await http.post(
            "/v1/context", json=body, headers={"authorization": f"Bearer {served.key}"}
        )
    assert answer.status_code == 200, answer.text
    context: dict[str, Any] = answer.json()
    return context


async def remembers_and_forgets(client: Client, served: Served, user: str) -> None:
    """A memory added through the tools is found by search_memory and /v1/context, listed,
    and gone once deleted."""
    listed = await client.list_tools()
    assert [t.name for t in listed.tools] == TOOLS
    added = await structured(
        client,
        "add_memory",
        {"content": "The user is allergic to peanuts.", "memory_type": "pref_mem"},
    )
    assert added["cube_id"] == "user_profile" and added["memory_type"] == "pref_mem"
    own = await structured(
        client, "add_memory", {"content": "The user prefers aisle seats.", "about": "agent"}
    )
    assert own["cube_id"] == "agent_travel"
    found = await structured(client, "search_memory", {"query": "peanuts allergy"})
    assert found["items"][0]["id"] == added["id"]
    context = await v1_context(served, user, "is the user allergic to peanuts")
    assert added["id"] in [item["id"] for item in context["long_term"]["items"]]
    assert "allergic to peanuts" in context["long_term"]["user_profile"]
    through_mcp = await structured(client, "get_context", {"query": "allergic to peanuts"})
    assert added["id"] in [item["id"] for item in through_mcp["long_term"]["items"]]
    everything = await structured(client, "list_memories", {})
    assert {added["id"], own["id"]} <= {item["id"] for item in everything["items"]}
    deleted = await structured(client, "delete_memory", {"memory_id": added["id"]})
    assert deleted["deleted"] == [added["id"]]
    again = await structured(client, "search_memory", {"query": "peanuts allergy"})
    assert added["id"] not in [item["id"] for item in again["items"]]


async def an_api_error_is_a_tool_error(client: Client) -> None:
    missing = await client.call_tool("delete_memory", {"memory_id": "no-such-memory"})
    assert missing.is_error
    assert "404 not_found" in text(missing) and "no live memory 'no-such-memory'" in text(missing)


async def test_the_tools_over_streamable_http(served: Served) -> None:
    user = unique("u")
    scope = {"x-memstream-user-id": user, "x-memstream-agent-id": "travel"}
    async with over_http(served, served.key, **scope) as client:
        await remembers_and_forgets(client, served, user)
        await an_api_error_is_a_tool_error(client)


async def test_the_tools_over_stdio(served: Served) -> None:
    user = unique("u")
    async with over_stdio(served, served.key, user, "-m", "memstream_client.mcp") as c:
        await remembers_and_forgets(c, served, user)
        await an_api_error_is_a_tool_error(c)


async def test_over_http_a_key_of_another_tenant_is_refused(served: Served) -> None:
    scope = {"x-memstream-tenant-id": served.tenant, "x-memstream-user-id": "u1"}
    async with over_http(served, served.other_key, **scope) as client:
        refused = await client.call_tool("search_memory", {"query": "anything"})
    assert refused.is_error
    assert "403 forbidden" in text(refused) and "may not access that tenant" in text(refused)
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        unknown = await http.post("/mcp", json={}, headers={"authorization": "Bearer nope"})
        nobody = await http.post("/mcp", json={"user": 1}, headers={"x-memstream-user-id": "u1"})
        no_user = await http.post(
            "/mcp", json={}, headers={"authorization": f"Bearer {served.key}"}
        )
    assert (unknown.status_code, unknown.json()["error"]["message"]) == (401, "unknown API key")
    assert nobody.status_code == 401
    assert (
        no_user.status_code == 400 and "x-memstream-user-id" in no_user.json()["error"]["message"]
    )


async def test_over_stdio_a_key_of_another_tenant_is_refused(served: Served) -> None:
    command = ("-m", "memstream", "mcp")  # the server's command runs the same code
    async with over_stdio(served, served.other_key, "u1", *command) as client:
        refused = await client.call_tool("add_memory", {"content": "The user likes tea."})
        listed = await client.call_tool("list_memories", {})
    for result in (refused, listed):
        assert result.is_error
        assert "403 forbidden" in text(result) and "may not access that tenant" in text(result)


async def test_get_context_carries_the_turns_the_worker_stored(
    served: Served, start_worker: Callable[[Settings], object]
) -> None:
    await ensure_topics(served.settings)
    start_worker(served.settings)
    user, conversation = unique("u"), unique("c")
    async with Publisher.from_settings(served.settings) as publisher:
        for role, content in [("user", "Book me a table for two."), ("assistant", "Done.")]:
            await publisher.message(
                tenant_id=served.tenant, user_id=user, agent_id="travel",
                conversation_id=conversation, role=role, content=content,
            )  # fmt: skip
    scope = {"x-memstream-user-id": user, "x-memstream-agent-id": "travel"}
    async with over_http(served, served.key, **scope) as client:

        async def stored() -> bool:
            context = await structured(
                client, "get_context", {"query": "table", "conversation_id": conversation}
            )
            return [m["content"] for m in context["messages"]] == [
                "Book me a table for two.",
                "Done.",
            ]

        await eventually(stored, within=60, what="the worker's turns through get_context")


async def stored_conversation(served: Served, engine: AsyncEngine, user: str) -> str:
    """A conversation of ``user`` in the record, with a summary, as the worker writes them."""
    conversation = unique("c")
    start = datetime(2026, 3, 1, 9, 0)
    lines = [("user", f"{user} keeps the safe code 4711."), ("assistant", "Noted.")]

    def stored(i: int, role: str, content: str) -> StoredMessage:
        return StoredMessage(
            tenant_id=served.tenant, conversation_id=conversation,
            event_id=f"{conversation}-{i}", user_id=user, agent_id="travel", role=role,
            message_type="chat", content=content, token_count=count_tokens(content),
            created_at=start + timedelta(seconds=i), source_conversation_id=conversation,
        )  # fmt: skip

    await MessageStore(engine).insert_many([stored(i, *line) for i, line in enumerate(lines)])
    summary = f"Earlier {user} said the safe code is 4711."
    await SummaryStore(engine).save(
        served.tenant, conversation, Summary(summary, count_tokens(summary)),
        covered=2, last_message_id=0,
    )  # fmt: skip
    return conversation


async def reaches_only_its_own_user(
    client: Client, served: Served, conversation: str, theirs: str
) -> None:
    """A model connected as one user names another user's conversation and memory: it reads
    no turn nor summary of it, and deletes nothing."""
    context = await structured(
        client, "get_context", {"query": "safe code", "conversation_id": conversation}
    )
    assert context["messages"] == []
    assert "4711" not in json.dumps(context)
    refused = await client.call_tool("delete_memory", {"memory_id": theirs})
    assert refused.is_error and "404 not_found" in text(refused)


async def test_the_tools_reach_no_other_users_conversation_or_memory(
    served: Served, engine: AsyncEngine
) -> None:
    owner, intruder = unique("u"), unique("u")
    conversation = await stored_conversation(served, engine, owner)
    async with httpx.AsyncClient(
        base_url=served.url, timeout=30, headers={"authorization": f"Bearer {served.key}"}
    ) as http:
        # An agent that reads the summary alone (no turns): the summary is reached too.
        config = await http.put(
            "/v1/agents/summarised/config",
            params={"tenant_id": served.tenant},
            json={"context_rounds": 0, "model_target_id": "m1"},
        )
        assert config.status_code == 200, config.text
        added = await http.post(
            "/v1/memories",
            json={"tenant_id": served.tenant, "user_id": owner, "agent_id": "travel",
                  "cube_id": "user_profile", "memory_type": "text_mem",
                  "content": "The user keeps a safe at home.", "importance": 5},
        )  # fmt: skip
        assert added.status_code == 201, added.text
        theirs = added.json()["id"]

        scope = {"x-memstream-user-id": intruder, "x-memstream-agent-id": "travel"}
        async with over_http(served, served.key, **scope) as client:
            await reaches_only_its_own_user(client, served, conversation, theirs)
        scope = {"x-memstream-user-id": intruder, "x-memstream-agent-id": "summarised"}
        async with over_http(served, served.key, **scope) as client:
            await reaches_only_its_own_user(client, served, conversation, theirs)
        stdio = over_stdio(served, served.key, intruder, "-m", "memstream_client.mcp")
        async with stdio as client:
            await reaches_only_its_own_user(client, served, conversation, theirs)

        # The owner reaches all: what the intruder did not get is there to get.
        async def owners(agent: str) -> list[str]:
            scope = {"x-memstream-user-id": owner, "x-memstream-agent-id": agent}
            async with over_http(served, served.key, **scope) as client:
                context = await structured(
                    client, "get_context", {"query": "safe code", "conversation_id": conversation}
                )
            return [m["content"] for m in context["messages"]]

        assert await owners("travel") == [f"{owner} keeps the safe code 4711.", "Noted."]
        assert "4711" in (await owners("summarised"))[0]
        listed = await http.get(
            "/v1/memories",
            params={"tenant_id": served.tenant, "user_id": owner, "agent_id": "travel"},
        )
        assert theirs in [item["id"] for item in listed.json()["items"]]


async def test_a_get_on_mcp_opens_no_stream(served: Served) -> None:
    headers = {"authorization": f"Bearer {served.key}", "x-memstream-user-id": "u1",
               "accept": "text/event-stream"}  # fmt: skip
    async with httpx.AsyncClient(base_url=served.url, timeout=5) as http:
        for method in ("GET", "DELETE"):
            answer = await http.request(method, "/mcp", headers=headers)
            assert answer.status_code == 405, answer.text
            assert answer.headers["allow"] == "POST"
            assert answer.json()["error"]["code"] == "method_not_allowed"
