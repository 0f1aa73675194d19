"""What the AgentScope middleware makes of messages and loads, with no IO: the turns a reply
publishes and their event ids, the note the model is shown, the merging of searches, and the
middleware's settings, tools and system prompt per mode."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.event import UserConfirmResultEvent
from agentscope.message import AssistantMsg, HintBlock, UserMsg

from memstream_client import AsyncClient
from memstream_client.agentscope import MemstreamMiddleware, prompt
from memstream_client.contract.api import (
    ContextMessage,
    ContextResponse,
    LongTerm,
    MemoryOut,
    TokenCounts,
)
from tests.fakes.chat_model import ScriptedChatModel


def load(messages: list[ContextMessage], profile: str = "", agent: str = "") -> ContextResponse:
    return ContextResponse(
        conversation_id="c1",
        messages=messages,
        long_term=LongTerm(provider="MYSQL", user_profile=profile, agent_memory=agent),
        tokens=TokenCounts(messages=0, user_profile=0, agent_memory=0),
        degraded=[],
    )


def said(role: str, content: str, summary: bool = False) -> ContextMessage:
    return ContextMessage(role=role, content=content, tokens=1, summary=summary)


def test_a_replys_user_messages_are_its_turns_and_its_query() -> None:
    first = UserMsg(name="user", content="I live in Berlin.")
    second = UserMsg(name="user", content="I'm allergic to peanuts.")
    told = AssistantMsg(name="other", content="Hello")
    turns = prompt.user_turns([first, told, second, UserMsg(name="user", content="  ")], "c1")
    assert [t.content for t in turns] == ["I live in Berlin.", "I'm allergic to peanuts."]
    assert {t.role for t in turns} == {"user"}
    assert prompt.query_of(turns) == "I live in Berlin.\nI'm allergic to peanuts."
    assert prompt.user_turns(first, "c1") == turns[:1]
    assert prompt.user_turns(None, "c1") == []
    assert prompt.user_turns(UserConfirmResultEvent(reply_id="r", confirm_results=[]), "c1") == []


def test_event_ids_are_stable_per_conversation_role_and_message() -> None:
    same = prompt.event_id("c1", "user", "m1")
    assert same == prompt.event_id("c1", "user", "m1") and len(same) <= 128
    # One message handed to two agents' conversations is two messages to memstream.
    assert (
        len({same, prompt.event_id("c2", "user", "m1"), prompt.event_id("c1", "assistant", "m1")})
        == 3
    )


def test_the_final_message_is_a_turn_when_it_has_text() -> None:
    reply = AssistantMsg(name="helper", content="Noted.")
    turn = prompt.assistant_turn(reply, "c1")
    assert turn is not None and (turn.role, turn.content) == ("assistant", "Noted.")
    assert turn.event_id == prompt.event_id("c1", "assistant", reply.id)
    assert prompt.assistant_turn(AssistantMsg(name="helper", content=" "), "c1") is None


def test_the_note_holds_the_long_term_lines_under_the_header() -> None:
    context = load(
        [], profile="[2026-12-01] The user is allergic to peanuts.\n", agent="Uses metric units."
    )
    lines = prompt.memory_lines(context)
    assert lines == ["[2026-12-01] The user is allergic to peanuts.", "Uses metric units."]
    note = prompt.memory_note(lines, header="## Memories", intro="Maybe relevant:")
    assert note == (
        "## Memories\nMaybe relevant:\n- [2026-12-01] The user is allergic to peanuts.\n"
        "- Uses metric units."
    )
    assert prompt.memory_note([], []) is None
    # A memory a note in the agent's context shows already is not added again.
    held = [AssistantMsg(name="memory", content=[HintBlock(hint=note)])]
    assert prompt.shown_lines(held) == set(lines)
    assert prompt.memory_lines(context, prompt.shown_lines(held)) == []
    assert prompt.memory_lines(context, {"Uses metric units."}) == lines[:1]


def test_the_window_shows_only_what_the_agent_does_not_hold() -> None:
    held = [
        UserMsg(name="user", content="Book Lisbon."),
        AssistantMsg(name="memory", content=[HintBlock(hint="- an old note")]),
        AssistantMsg(name="memory", content="assistant: Done."),
    ]
    known = prompt.known_messages(held)
    assert known == {("user", "Book Lisbon.")}
    window = [
        said("system", "The user plans a trip.", summary=True),
        said("user", "Book Lisbon."),
        said("assistant", "Done."),
    ]
    assert prompt.window_lines(load(window), known) == [
        "Summary of the earlier conversation: The user plans a trip.",
        "assistant: Done.",
    ]
    # The agent holds the whole window: nothing again, not even the summary.
    everything = known | {("assistant", "Done.")}
    assert prompt.window_lines(load(window), everything) == []
    # A window that is only the summary is shown.
    assert prompt.window_lines(load(window[:1]), everything) == [
        "Summary of the earlier conversation: The user plans a trip."
    ]
    note = prompt.memory_note([], ["user: hi"])
    assert note is not None and note.startswith("## Earlier in this conversation")


def memory(id_: str, content: str, score: float) -> MemoryOut:
    return MemoryOut(
        id=id_, cube_id="user_profile", memory_type="text_mem", content=content, score=score,
        source_event_ids=[], created_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip


def test_several_searches_merge_each_memory_once_best_first() -> None:
    peanuts, berlin, cats = (
        memory("1", "peanuts", 0.5),
        memory("2", "Berlin", 0.7),
        memory("3", "cats", 0.4),
    )
    again = memory("1", "peanuts", 0.9)
    assert prompt.found_lines([[peanuts, berlin], [again, cats], []]) == [
        "peanuts",
        "Berlin",
        "cats",
    ]
    assert prompt.found_lines([]) == []


def middleware(**options: Any) -> MemstreamMiddleware:
    """A middleware on an API client that these tests never call."""
    settings: dict[str, Any] = {"tenant_id": "t", "user_id": "u", **options}
    return MemstreamMiddleware(api=AsyncClient("http://127.0.0.1:9"), **settings)


@pytest.mark.parametrize(
    ("mode", "tools", "prompted"),
    [
        ("static_control", [], False),
        ("agent_control", ["search_memory", "add_memory"], True),
        ("both", ["search_memory", "add_memory"], True),
    ],
)
async def test_each_mode_offers_the_tools_and_the_prompt_line_agentscope_does(
    mode: str, tools: list[str], prompted: bool
) -> None:
    memory_ = middleware(mode=mode)
    assert [t.name for t in await memory_.list_tools()] == tools
    agent = Agent(name="helper", system_prompt="You help.", model=ScriptedChatModel([]))
    system_prompt = await memory_.on_system_prompt(agent, "You help.")
    assert system_prompt.startswith("You help.") and ("search_memory" in system_prompt) == prompted


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "sometimes"},
        {"recall": "everything"},
        {"user_id": " "},
        {"agent_id": "x" * 129},
        {"conversation_id": ""},
        {"add_to": "agent"},
    ],
)
def test_settings_that_cannot_work_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        middleware(**options)


def test_add_memory_writes_to_the_cube_it_is_told() -> None:
    assert middleware().cube_id == "user_profile"
    assert middleware(agent_id="travel", add_to="agent").cube_id == "agent_travel"
