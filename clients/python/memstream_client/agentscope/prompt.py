"""What the middleware makes of AgentScope messages and of memstream's answers, with no IO: the
query of a reply, the events a turn publishes, and the memory note the model is shown."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentscope.message import Msg

from memstream_client.contract.api import ContextResponse, MemoryOut

# The name of the note the middleware adds to an agent's context, as AgentScope's own memory
# middlewares name theirs; it is how the note is told apart from the conversation.
MEMORY_MSG_NAME = "memory"

MEMORY_SECTION_HEADER = "## Relevant memories from past conversations"
MEMORY_SECTION_INTRO = (
    "The following memories about the user may be relevant. "
    "Use them only if they are pertinent to the current request."
)
WINDOW_SECTION_HEADER = "## Earlier in this conversation"
WINDOW_SECTION_INTRO = "Stored history of this conversation that is not in your context:"

TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory` and `add_memory` tools available. Use them whenever the "
    "conversation depends on (search) or contributes (add) a durable fact about the user; "
    "see each tool's own description for the exact input shape."
)

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a turn as memstream stores it: ``event_id`` is derived from the
    conversation, the role and AgentScope's message id, so publishing it again stores it once."""

    event_id: str
    role: Role
    content: str


def event_id(conversation_id: str, role: str, message_id: str) -> str:
    """A message's event id. AgentScope's message id alone is not enough: one message handed to
    two agents is two messages of two conversations for memstream."""
    digest = hashlib.sha256(f"{conversation_id}\0{role}\0{message_id}".encode()).hexdigest()
    return f"agentscope-{digest[:40]}"


def user_turns(inputs: Any, conversation_id: str) -> list[Turn]:
    """The user messages with text among a reply's inputs: none for a resumption (a user's
    confirmation, an external tool's result) or no input at all."""
    messages = inputs if isinstance(inputs, list) else [inputs]
    turns = []
    for message in messages:
        if not isinstance(message, Msg) or message.role != "user":
            continue
        text = message.get_text_content()
        if text and text.strip():
            turns.append(Turn(event_id(conversation_id, "user", message.id), "user", text))
    return turns


def query_of(turns: Sequence[Turn]) -> str:
    """What the load path is asked about: the reply's user text."""
    return "\n".join(turn.content for turn in turns)


def assistant_turn(message: Msg, conversation_id: str) -> Turn | None:
    """The reply's final message as a turn, None when it has no text to remember."""
    text = message.get_text_content()
    if not text or not text.strip():
        return None
    return Turn(event_id(conversation_id, "assistant", message.id), "assistant", text)


def known_messages(context: Iterable[Msg]) -> set[tuple[str, str]]:
    """(role, text) of what the agent already holds, the middleware's own notes left out."""
    known: set[tuple[str, str]] = set()
    for message in context:
        if message.name == MEMORY_MSG_NAME:
            continue
        text = message.get_text_content()
        if text:
            known.add((message.role, text))
    return known


def memory_lines(context: ContextResponse, shown: Collection[str] = ()) -> list[str]:
    """The long-term lines of a load, user profile first (memstream's budgeted texts, one
    memory a line), without those an earlier note in the agent's context ``shown``."""
    texts = (context.long_term.user_profile, context.long_term.agent_memory)
    lines = [line.strip() for text in texts for line in text.splitlines()]
    return [line for line in lines if line and line not in shown]


def shown_lines(context: Iterable[Msg]) -> set[str]:
    """The memories the middleware's notes still in the agent's context show: a memory is not
    added again at every turn while the model has it (a compressed context has it no more)."""
    shown: set[str] = set()
    for message in context:
        if message.name != MEMORY_MSG_NAME:
            continue
        for block in message.get_content_blocks("hint"):
            if isinstance(block.hint, str):
                shown.update(line[2:] for line in block.hint.splitlines() if line.startswith("- "))
    return shown


def window_lines(context: ContextResponse, known: set[tuple[str, str]]) -> list[str]:
    """The short-term window's messages the agent does not hold (a new process resuming a
    stored conversation), with the conversation summary when any is missing."""
    summaries = [m for m in context.messages if m.summary]
    messages = [m for m in context.messages if not m.summary]
    missing = [m for m in messages if (m.role, m.content) not in known]
    if messages and not missing:
        return []
    lines = [f"Summary of the earlier conversation: {m.content}" for m in summaries]
    return lines + [f"{m.role}: {m.content}" for m in missing]


def memory_note(
    memories: Sequence[str],
    window: Sequence[str] = (),
    *,
    header: str = MEMORY_SECTION_HEADER,
    intro: str = MEMORY_SECTION_INTRO,
) -> str | None:
    """The text of the note the model is shown, None when there is nothing to show."""
    sections = []
    if memories:
        sections.append("\n".join([header, intro, *(f"- {m}" for m in memories)]))
    if window:
        sections.append(
            "\n".join([WINDOW_SECTION_HEADER, WINDOW_SECTION_INTRO, *(f"- {w}" for w in window)])
        )
    return "\n\n".join(sections) or None


def found_lines(results: Iterable[Sequence[MemoryOut]]) -> list[str]:
    """The memories of several searches, each once, best score first."""
    best: dict[str, MemoryOut] = {}
    for items in results:
        for item in items:
            if item.id not in best or item.score > best[item.id].score:
                best[item.id] = item
    ranked = sorted(best.values(), key=lambda item: item.score, reverse=True)
    return [item.content for item in ranked]
