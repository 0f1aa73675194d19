"""The chat model an AgentScope agent is given in tests, standing in for a hosted LLM: a real
``ChatModelBase`` that answers scripted replies in order and keeps what it was sent, formatted
as AgentScope's OpenAI formatter sends it to an LLM."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import ToolChoice


@dataclass(frozen=True)
class ToolCall:
    """A scripted reply that calls tool ``name`` with ``arguments``."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Sent:
    """One model call: the messages as an LLM gets them and the names of the tools offered."""

    messages: list[dict[str, Any]]
    tools: list[str] = field(default_factory=list)

    def text(self) -> str:
        """Everything the messages say, as one string."""
        return json.dumps(self.messages, ensure_ascii=False)


class ScriptedChatModel(ChatModelBase):
    """Answers each call with the next of ``replies`` (a string is a text answer); with none
    left it fails, so a test that expects fewer calls says so."""

    def __init__(self, replies: list[str | ToolCall]) -> None:
        super().__init__(
            credential=CredentialBase(),
            model="scripted",
            parameters=ChatModelBase.Parameters(),
            stream=False,
            max_retries=0,
        )
        self.formatter = OpenAIChatFormatter()
        self.replies = list(replies)
        self.sent: list[Sent] = []

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        names = [t["function"]["name"] for t in tools or []]
        self.sent.append(Sent(await self.formatter.format(messages), names))
        if not self.replies:
            raise AssertionError(f"the model was called {len(self.sent)} times; no reply left")
        reply = self.replies.pop(0)
        if isinstance(reply, str):
            return ChatResponse(content=[TextBlock(text=reply)], is_last=True)
        call = ToolCallBlock(
            id=uuid.uuid4().hex, name=reply.name, input=json.dumps(reply.arguments)
        )
        return ChatResponse(content=[call], is_last=True)
