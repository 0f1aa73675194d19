"""``MemstreamMiddleware`` on a real AgentScope agent and the real services: in each mode an
agent remembers across two sessions. Session one tells a fact and ends; the worker's long-term
chain (the rule judge) stores it; in session two the memory is in what the model was sent
(``static_control``, ``both``) or found by the agent calling ``search_memory``
(``agent_control``). The model is a scripted ``ChatModelBase``; everything else is real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import ToolBase, Toolkit

from memstream.broker.topics import ensure_topics
from memstream.settings import Settings
from memstream_client import AsyncClient, Publisher
from memstream_client.agentscope import MemstreamMiddleware, Mode
from tests.fakes.chat_model import ScriptedChatModel, ToolCall
from tests.support.processes import WorkerProcess, api_process
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

FACT = "I'm allergic to peanuts."
REMEMBERED = "The user is allergic to peanuts"
QUESTION = "Can I have a snack with peanuts tonight?"
TENANTS = {mode: unique(f"agentscope-{mode.replace('_', '-')}") for mode in ("a", "b", "c", "d")}


@dataclass(frozen=True)
class Served:
    settings: Settings
    url: str
    worker: WorkerProcess


@pytest.fixture(scope="module")
def served(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One API and one worker for the module, each test on a tenant (and key) of its own."""
    keys = ",".join(f"key-{tenant}:{tenant}" for tenant in TENANTS.values())
    # The load path's time limit on long-term memory is for production latency: on a loaded
    # test machine a cold first search can take longer, and answer empty (degraded).
    settings = isolated_settings(
        api_port=free_port(),
        log_level="WARNING",
        api_keys=keys,
        long_term_timeout_seconds=10,
    )
    worker = WorkerProcess(settings, tmp_path_factory.mktemp("agentscope"))
    with api_process(settings) as url:
        yield Served(settings, url, worker)
        worker.kill()


@pytest.fixture
async def started(served: Served) -> Served:
    # Topics are the workers' to create, with their partition count.
    if not served.worker.alive():
        await ensure_topics(served.settings)
        served.worker.start()
    return served


@pytest.fixture
async def publisher(started: Served) -> AsyncIterator[Publisher]:
    async with Publisher.from_settings(started.settings) as publisher:
        yield publisher


def agent_with(
    memory: MemstreamMiddleware,
    model: ScriptedChatModel,
    tools: list[ToolBase],
    session_id: str | None = None,
) -> Agent:
    """An agent of the middleware; with ``session_id``, a new process resuming that session on a
    fresh state."""
    return Agent(
        name="helper",
        system_prompt="You are a helpful assistant.",
        model=model,
        toolkit=Toolkit(tools=tools),
        middlewares=[memory],
        state=AgentState(session_id=session_id) if session_id else None,
    )


async def session_one(
    api: AsyncClient, memory: MemstreamMiddleware, worker: WorkerProcess
) -> Agent:
    """The user tells the fact, the session ends, and the long-term chain stores it."""
    agent = agent_with(memory, ScriptedChatModel(["Noted, I will keep that in mind."]), [])
    await agent.reply(UserMsg(name="user", content=FACT))
    await memory.end_session(agent)

    async def remembered() -> bool:
        found = await api.memories(
            tenant_id=memory.tenant_id, user_id=memory.user_id, agent_id=memory.agent_id
        )
        return any(REMEMBERED in m.content for m in found.items)

    await eventually(
        remembered, within=120, what=f"the fact in long-term memory ({worker.log_path})"
    )
    stored = await api.messages(tenant_id=memory.tenant_id, conversation_id=agent.state.session_id)
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", FACT),
        ("assistant", "Noted, I will keep that in mind."),
    ]
    return agent


@asynccontextmanager
async def memory_of(
    served: Served, publisher: Publisher, tenant: str, mode: Mode
) -> AsyncIterator[tuple[AsyncClient, MemstreamMiddleware]]:
    """The API client with the tenant's key, and a middleware of user ``u1`` on it."""
    tenant_id = TENANTS[tenant]
    async with AsyncClient(served.url, api_key=f"key-{tenant_id}") as api:
        yield api, MemstreamMiddleware(
            api=api, publisher=publisher, tenant_id=tenant_id, user_id="u1", agent_id="helper",
            mode=mode,
        )  # fmt: skip


@pytest.mark.parametrize(("mode", "tenant"), [("static_control", "a"), ("both", "b")])
async def test_the_memory_is_in_what_the_model_is_sent_in_the_next_session(
    started: Served, publisher: Publisher, mode: Mode, tenant: str
) -> None:
    async with memory_of(started, publisher, tenant, mode) as (api, memory):
        first = await session_one(api, memory, started.worker)

        model = ScriptedChatModel(["Better not: you are allergic to peanuts.", "No, sorry."])
        second = agent_with(memory, model, await memory.list_tools())
        assert second.state.session_id != first.state.session_id
        reply = await second.reply(UserMsg(name="user", content=QUESTION))
        # The next turn finds the same memory, which the context shows already.
        await second.reply(UserMsg(name="user", content="Not even peanuts in a sauce?"))

    assert reply.get_text_content() == "Better not: you are allergic to peanuts."
    sent, again = model.sent
    assert REMEMBERED in sent.text() and "Relevant memories from past conversations" in sent.text()
    # The note comes right after the user's message, before the model's first call, once.
    notes = [m for m in second.state.context if m.name == "memory"]
    assert len(notes) == 1 and second.state.context.index(notes[0]) == 1
    assert again.text().count(REMEMBERED) == 1
    tools = {"search_memory", "add_memory"} & set(sent.tools)
    system_prompt = sent.messages[0]["content"][0]["text"]
    if mode == "static_control":
        assert tools == set() and "search_memory" not in system_prompt
    else:
        assert tools == {"search_memory", "add_memory"} and "search_memory" in system_prompt


async def test_with_agent_control_the_agent_finds_the_memory_with_its_search_tool(
    started: Served, publisher: Publisher
) -> None:
    async with memory_of(started, publisher, "c", "agent_control") as (api, memory):
        await session_one(api, memory, started.worker)

        model = ScriptedChatModel(
            [
                ToolCall("search_memory", {"keywords": ["allergies", "peanuts"]}),
                ToolCall(
                    "add_memory",
                    {
                        "thinking": "a lasting preference",
                        "content": ["The user likes window seats."],
                    },
                ),
                "Better not: you are allergic to peanuts.",
            ]
        )
        second = agent_with(memory, model, await memory.list_tools())
        reply = await second.reply(UserMsg(name="user", content=QUESTION))
        found = await api.search_memories(
            tenant_id=memory.tenant_id, user_id="u1", agent_id="helper", query="window seats"
        )

    assert reply.get_text_content() == "Better not: you are allergic to peanuts."
    searched, added, answered = model.sent
    # No retrieval of its own in this mode: the first call holds no memory, only the tools.
    assert REMEMBERED not in searched.text() and "Relevant memories" not in searched.text()
    assert {"search_memory", "add_memory"} <= set(searched.tools)
    assert "search_memory" in searched.messages[0]["content"][0]["text"]
    # The search tool's result is what the model reads next.
    assert REMEMBERED in added.text()
    assert "Recorded 1 memories" in answered.text()
    assert [m.content for m in found.items][:1] == ["The user likes window seats."]


async def test_a_new_agent_resuming_a_stored_conversation_is_shown_what_it_does_not_hold(
    started: Served, publisher: Publisher
) -> None:
    async with memory_of(started, publisher, "d", "static_control") as (api, memory):
        tenant_id = memory.tenant_id
        first_model = ScriptedChatModel(["Noted: Lisbon in May.", "In May."])
        first = agent_with(memory, first_model, [])
        await first.reply(UserMsg(name="user", content="I am planning a week in Lisbon in May."))
        conversation = first.state.session_id

        async def stored() -> bool:
            history = await api.messages(tenant_id=tenant_id, conversation_id=conversation)
            return len(history.messages) == 2

        await eventually(stored, within=60, what="the first turn in the record")
        # The same agent holds the turn already: it is not shown again.
        await first.reply(UserMsg(name="user", content="Which month did I say?"))
        # A new process resumes the conversation with a fresh state of the same session.
        model = ScriptedChatModel(["You said May."])
        await agent_with(memory, model, [], conversation).reply(
            UserMsg(name="user", content="Which month?")
        )
        long_term_only = MemstreamMiddleware(
            api=api, tenant_id=tenant_id, user_id="u1", agent_id="helper",
            mode="static_control", recall="long_term",
        )  # fmt: skip
        only_model = ScriptedChatModel(["I do not know."])
        without_window = agent_with(long_term_only, only_model, [], conversation)
        await without_window.reply(UserMsg(name="user", content="Which month?"))

    assert [m.name for m in first.state.context].count("memory") == 0
    assert "Earlier in this conversation" not in first_model.sent[1].text()
    [sent] = model.sent
    assert "Earlier in this conversation" in sent.text()
    assert "user: I am planning a week in Lisbon in May." in sent.text()
    assert "assistant: Noted: Lisbon in May." in sent.text()
    assert "Earlier in this conversation" not in only_model.sent[0].text()
