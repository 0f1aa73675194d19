"""``MemstreamMiddleware``: memstream as the long-term memory of an AgentScope 2.x agent, built
the way AgentScope's own ``Mem0Middleware`` is.
Why it works this way: docs/design/agentscope-middleware.md."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agentscope.event import ReplyStartEvent
from agentscope.message import AssistantMsg, HintBlock, Msg
from agentscope.middleware import MiddlewareBase
from agentscope.types import ReplyFinishedReason

from memstream_client import AsyncClient, Published, Publisher
from memstream_client.agentscope.prompt import (
    MEMORY_MSG_NAME,
    MEMORY_SECTION_HEADER,
    MEMORY_SECTION_INTRO,
    TOOL_INSTRUCTIONS,
    Turn,
    assistant_turn,
    found_lines,
    known_messages,
    memory_lines,
    memory_note,
    query_of,
    shown_lines,
    user_turns,
    window_lines,
)
from memstream_client.agentscope.tools import memory_tools
from memstream_client.contract.api import MemoryOut, MemoryType
from memstream_client.contract.errors import ApiError, InvalidEvent, ServiceUnavailable

if TYPE_CHECKING:
    from agentscope.agent import Agent
    from agentscope.tool import ToolBase

log = logging.getLogger(__name__)

Mode = Literal["static_control", "agent_control", "both"]
Recall = Literal["context", "long_term"]
MODES: tuple[Mode, ...] = ("static_control", "agent_control", "both")
# A reply the user was given; an interrupted one or one parked on a confirmation is not a turn.
RECORDED_ENDS = (ReplyFinishedReason.COMPLETED, ReplyFinishedReason.EXCEED_MAX_ITERS)
MAX_ID_CHARS = 128


def _checked_id(name: str, value: str | None, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise ValueError(f"MemstreamMiddleware needs `{name}` of 1 to {MAX_ID_CHARS} characters")


class MemstreamMiddleware(MiddlewareBase):
    """Long-term memory for an AgentScope agent, backed by memstream.

    ``api`` is a started :class:`~memstream_client.AsyncClient`; ``publisher`` a started
    :class:`~memstream_client.Publisher`, or None when the platform publishes the conversation
    itself (the middleware then only retrieves). The middleware uses both and closes neither.

    The conversation is the agent's session (``agent.state.session_id``, read at each reply, so
    one middleware may serve several agents) unless ``conversation_id`` fixes it.
    """

    def __init__(
        self,
        *,
        api: AsyncClient,
        tenant_id: str,
        user_id: str,
        agent_id: str | None = None,
        publisher: Publisher | None = None,
        mode: Mode = "both",
        recall: Recall = "context",
        context_rounds: int | None = None,
        conversation_id: str | None = None,
        top_k: int = 5,
        add_to: Literal["user_profile", "agent"] = "user_profile",
        memory_type: MemoryType = "text_mem",
        memory_section_header: str = MEMORY_SECTION_HEADER,
        memory_section_intro: str = MEMORY_SECTION_INTRO,
        tool_instructions: str = TOOL_INSTRUCTIONS,
    ) -> None:
        """``recall``: ``context`` asks the load path for the short-term window and long-term
        memory (window messages the agent already holds are not shown again), ``long_term``
        for long-term memory only. ``context_rounds`` overrides the agent's configured rounds.
        ``top_k`` is the ``search_memory`` tool's default limit per keyword; ``add_to`` the cube
        ``add_memory`` writes to (the user's profile, or this agent's own memory)."""
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if recall not in ("context", "long_term"):
            raise ValueError(f"Unknown recall {recall!r}; expected 'context' or 'long_term'")
        _checked_id("tenant_id", tenant_id)
        _checked_id("user_id", user_id)
        _checked_id("agent_id", agent_id, optional=True)
        _checked_id("conversation_id", conversation_id, optional=True)
        if add_to == "agent" and agent_id is None:
            raise ValueError("add_to='agent' needs an `agent_id`")
        self.api = api
        self.publisher = publisher
        self.tenant_id = tenant_id
        self.user_id = user_id
        self.agent_id = agent_id
        self.mode: Mode = mode
        self.recall: Recall = recall
        self.context_rounds = context_rounds
        self.conversation_id = conversation_id
        self.top_k = top_k
        self.cube_id = "user_profile" if add_to == "user_profile" else f"agent_{agent_id}"
        self.memory_type: MemoryType = memory_type
        self.memory_section_header = memory_section_header
        self.memory_section_intro = memory_section_intro
        self.tool_instructions = tool_instructions

    def conversation_of(self, agent: Agent) -> str:
        """The memstream conversation of ``agent``'s current session."""
        return self.conversation_id or agent.state.session_id

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        conversation = self.conversation_of(agent)
        turns = user_turns(input_kwargs.get("inputs"), conversation)
        note = None
        if self.mode != "agent_control" and turns:
            note = await self._recall(agent, conversation, query_of(turns))
        final: Msg | None = None
        async for item in next_handler(**input_kwargs):
            # ReplyStartEvent: the agent has taken the user's message into its context, and
            # before the first model call; the note goes right after that message.
            if isinstance(item, ReplyStartEvent):
                if note is not None:
                    agent.state.context.append(
                        AssistantMsg(name=MEMORY_MSG_NAME, content=[HintBlock(hint=note)])
                    )
                    note = None
                await self._record(conversation, turns)
            if isinstance(item, Msg) and item.role == "assistant":
                final = item
            yield item
        if final is not None and final.finished_reason in RECORDED_ENDS:
            answer = assistant_turn(final, conversation)
            if answer is not None:
                await self._record(conversation, [answer])

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        if self.mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self.tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """``search_memory`` and ``add_memory`` in ``agent_control`` and ``both``; none in
        ``static_control``. Pass them to the agent's toolkit."""
        if self.mode == "static_control":
            return []
        return memory_tools(self)

    async def end_session(self, agent: Agent) -> Published:
        """Publish the ``session-ended`` of ``agent``'s conversation: memstream then builds
        long-term memory from it. AgentScope's agent has no end of its own, so the platform
        calls this when the conversation is over (the user closed it, an idle timeout)."""
        if self.publisher is None:
            raise RuntimeError("MemstreamMiddleware has no publisher to end a session with")
        return await self.publisher.session_ended(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            conversation_id=self.conversation_of(agent),
        )

    async def search(self, keywords: Sequence[str], limit: int) -> list[str]:
        """The memories found for any of ``keywords`` (one search each), best first."""
        found = await asyncio.gather(
            *(
                self.api.search_memories(
                    tenant_id=self.tenant_id,
                    user_id=self.user_id,
                    agent_id=self.agent_id,
                    query=keyword,
                    top_k=limit,
                )
                for keyword in keywords
            )
        )
        return found_lines(answer.items for answer in found)

    async def add(self, contents: Sequence[str]) -> list[MemoryOut]:
        """Store each of ``contents`` as one memory (memstream stores no exact duplicate)."""
        return [
            await self.api.add_memory(
                tenant_id=self.tenant_id,
                user_id=self.user_id,
                agent_id=self.agent_id,
                cube_id=self.cube_id,
                memory_type=self.memory_type,
                content=content,
            )
            for content in contents
        ]

    async def _recall(self, agent: Agent, conversation: str, query: str) -> str | None:
        """The note for this reply; None when memstream has nothing or does not answer (the
        reply goes on without memory, as AgentScope's own memory middlewares do)."""
        rounds = 0 if self.recall == "long_term" else self.context_rounds
        try:
            context = await self.api.context(
                tenant_id=self.tenant_id,
                user_id=self.user_id,
                agent_id=self.agent_id,
                conversation_id=conversation,
                query=query,
                context_rounds=rounds,
            )
        except (ApiError, ServiceUnavailable) as exc:
            log.warning("memstream context failed for conversation %s: %s", conversation, exc)
            return None
        window = (
            []
            if self.recall == "long_term"
            else window_lines(context, known_messages(agent.state.context))
        )
        return memory_note(
            memory_lines(context, shown_lines(agent.state.context)),
            window,
            header=self.memory_section_header,
            intro=self.memory_section_intro,
        )

    async def _record(self, conversation: str, turns: Sequence[Turn]) -> None:
        """Publish ``turns``; a broker that does not take them is logged, not raised: the
        reply the user gets does not wait on memory."""
        if self.publisher is None:
            return
        for turn in turns:
            try:
                await self.publisher.message(
                    tenant_id=self.tenant_id,
                    user_id=self.user_id,
                    agent_id=self.agent_id,
                    conversation_id=conversation,
                    role=turn.role,
                    content=turn.content,
                    event_id=turn.event_id,
                )
            except (InvalidEvent, ServiceUnavailable) as exc:
                log.warning(
                    "memstream did not get a %s message of conversation %s: %s",
                    turn.role,
                    conversation,
                    exc,
                )
